package daemon

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/store"
)

// Standbys returns the standby election of the configuration: coordinator.standbys
// slot locks with the leader lock's TTL and lock delay, the census the leader
// publishes (count counts the candidates), and the default quiet periods. The slots share one client of their
// own (api.Client.Locks rewrites its client's retry settings, the same for every
// slot, and at most one slot is held at a time).
func Standbys(cfg *config.Compiled, st *store.Store, count func(context.Context) (int, error)) (election.Standbys, error) {
	sb := election.Standbys{
		Census:      st.Census,
		Count:       count,
		Publish:     st.PublishCensus,
		Interval:    election.DefaultQuietInterval,
		MinPeriod:   election.DefaultQuietMinPeriod,
		MaxPeriod:   election.DefaultQuietMaxPeriod,
		CensusEvery: election.DefaultCensusEvery,
	}
	if cfg.Coordinator.Standbys == 0 {
		return sb, nil
	}
	c, err := Client(cfg)
	if err != nil {
		return sb, err
	}
	ttl := cfg.Coordinator.LockTTL.String()
	for i := range cfg.Coordinator.Standbys {
		v := api.Variable{
			Namespace: cfg.Nomad.Namespace,
			Path:      st.StandbyPath(i),
			Lock:      &api.VariableLock{TTL: ttl, LockDelay: ttl},
		}
		l, err := c.Locks(api.WriteOptions{Namespace: cfg.Nomad.Namespace}, v)
		if err != nil {
			return sb, fmt.Errorf("coordinator standby slot %s: %w", v.Path, err)
		}
		sb.Slots = append(sb.Slots, l)
	}
	return sb, nil
}
