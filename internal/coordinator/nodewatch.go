package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/watch"
)

// The node list from Nomad's event stream (package nodestream). Watching the
// node list with a blocking query reads every node again at each change: at a
// thousand nodes, 600 KB decoded for every drain, status and eligibility change
// of a rollout, a fifth of its CPU. The event stream's Node topic carries the
// node written, alone (nomad/state/events.go: one event per node row a Raft
// apply wrote, its payload the node after the write). So the follower
// subscribes first, then reads the whole list once, and applies to it every
// node event after the list's index: a write before the subscription is in the
// list, one after it is in the stream, and the events the stream replays from
// its buffer (a subscription at index 0 starts at the oldest event kept) are
// older than the list and skipped. The list it keeps is the node list as a
// blocking query would have answered it at the last event's index.
//
// It starts again with a new subscription and a fresh list after an error, an
// end of the stream, and every watch.MaxWait: as often as the blocking query
// asked again, so that a connection that went silent (Nomad sends a heartbeat
// every 30 s; the client drops them) is not trusted for longer than a blocking
// query would have been. Meanwhile the passes read the list themselves.

// followNodes keeps the mailbox's node list current from the event stream
// until ctx ends, poking the reconcile loop after each change.
func (c *Coordinator) followNodes(ctx context.Context, poke func()) {
	fails := 0
	for ctx.Err() == nil {
		err := c.followNodesOnce(ctx, poke)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			fails = 0 // its period ended: subscribe again
			continue
		}
		c.mail.setNodes(nil, 0) // not known to be current: passes read it
		fails++
		d := watch.DefaultRetry(err, fails)
		c.log.Warn("node event stream failed: the passes read the node list until it is back",
			"err", err, "retry_in", d, "failures", fails)
		if !watch.Sleep(ctx, d) {
			return
		}
	}
}

// followNodesOnce subscribes, reads the list, and applies the events for one
// period (nil when the period ended).
func (c *Coordinator) followNodesOnce(parent context.Context, poke func()) error {
	ctx, cancel := context.WithTimeout(parent, watch.MaxWait)
	defer cancel()
	events, err := c.opt.NodeEvents.NodeEvents(ctx, 0)
	if err != nil {
		return fmt.Errorf("subscribe to the node events: %w", err)
	}
	list, meta, err := c.opt.Nodes.List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	// An item at or before the list's index is in the list. Items after it are
	// applied in the order they come (the emulator may send two at one index).
	listed, index := meta.LastIndex, meta.LastIndex
	had := c.mail.nodesAt(index)
	c.mail.setNodes(list, index) // the next pass takes it (nodes.go)
	if !had {
		poke()
	}
	for {
		var evs *api.Events
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case evs, ok = <-events:
		}
		// Take every batch already received: one list and one poke for all.
		var changed []*api.NodeListStub
		var gone []string
		for {
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the node event stream ended")
			}
			if evs.Err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("node event stream: %w", evs.Err)
			}
			if evs.Index > listed {
				ch, gn, err := nodestream.Changes(evs)
				if err != nil {
					return err
				}
				changed, gone = append(changed, ch...), append(gone, gn...)
				index = max(index, evs.Index)
			}
			select {
			case evs, ok = <-events:
				continue
			default:
			}
			break
		}
		if len(changed) == 0 && len(gone) == 0 {
			continue
		}
		list = nodestream.Apply(list, changed, gone)
		c.mail.setNodes(list, index)
		poke()
	}
}

// catchUpWait is how long a pass waits for the node events of its own last
// node write before it reads the whole list itself (nodeList). The event
// follows the write's answer within milliseconds; a pass chained after a
// drain or an eligibility change would otherwise read every node again.
const catchUpWait = 250 * time.Millisecond
