package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/doctor"
)

// startupChecks runs `rollboot doctor`'s checks once, the first time this
// process leads, beside the coordinator, and logs each finding that is not
// OK at INFO, WARN or ERROR with its fix. Once per process, on the leader
// only: the candidates that never lead read nothing for it. The event stream
// is not probed (the coordinator follows it and says when it cannot), nor
// whether a coordinator leads (this one does).
type startupChecks struct {
	cfg      *config.Compiled
	clusters coordinator.ClusterAccess
	log      *slog.Logger

	once sync.Once
	wg   sync.WaitGroup
}

// lead wraps the leader's run: the checks start with the first term.
func (s *startupChecks) lead(run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		s.once.Do(func() { s.wg.Go(func() { s.run(ctx) }) })
		return run(ctx)
	}
}

// wait waits for the checks to end (they end with the term they began in).
func (s *startupChecks) wait() { s.wg.Wait() }

func (s *startupChecks) run(ctx context.Context) {
	log := s.log.With("component", "doctor")
	c, dates, err := doctor.NomadClient(s.cfg)
	if err != nil {
		log.Warn("cannot run the start-up checks", "err", err)
		return
	}
	defer c.Close()
	src := doctor.Nomad{Client: c, Store: Store(s.cfg, c), Dates: dates, Namespace: s.cfg.Nomad.Namespace}
	if cl, ok := s.clusters.(*Clusters); ok {
		src.Consul, src.Vault = cl.Consul, cl.Vault
	}
	in := doctor.Read(ctx, src, doctor.ReadOptions{Options: doctor.OptionsFor(s.cfg), SkipBroker: true, SkipCoordinator: true}, time.Now)
	if ctx.Err() != nil {
		return // the term ended while reading: what was read is not the cluster's
	}
	fs := doctor.Check(in)
	doctor.Log(log, fs)
	log.Info("start-up checks done (rollboot doctor shows them all)",
		"errors", doctor.Count(fs, doctor.Error), "warnings", doctor.Count(fs, doctor.Warning))
}
