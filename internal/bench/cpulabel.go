package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"time"
)

// The coordinator's CPU in a rollout. It runs in the bench's process beside a
// thousand agents and the emulator, so the process's CPU is not its own. Its
// goroutine carries a pprof label (pprof.Do), which every goroutine it starts
// inherits (its watches, its HTTP connections' read and write loops: its
// Nomad client is its own), and a CPU profile of the rollout, sampled 100
// times a second per thread as Go's profiler does, counts the samples of the
// labelled goroutines apart. Not counted: the garbage collector's background
// workers, shared by the whole process (the assists a goroutine makes while
// it allocates are its own, and counted).

// cpuLabel is the pprof label key the bench gives to the goroutines it
// measures the CPU of.
const cpuLabel = "rollboot_bench"

// withCPULabel runs f with the goroutine (and every goroutine it starts)
// labelled cpuLabel=value.
func withCPULabel(ctx context.Context, value string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(cpuLabel, value), f)
}

// cpuProfile is a CPU profile of the process under way.
type cpuProfile struct {
	buf     bytes.Buffer
	stopped bool
}

// startCPUProfile starts profiling the process's CPU. It fails when a profile
// is already being written (the bench's -cpu-profile): Go runs one at a time.
func startCPUProfile() (*cpuProfile, error) {
	p := &cpuProfile{}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		return nil, err
	}
	return p, nil
}

// stop ends the profile and returns the CPU time of the goroutines labelled
// cpuLabel=value, and of the whole process.
func (p *cpuProfile) stop(value string) (labelled, total time.Duration, err error) {
	p.close()
	return labelledCPU(&p.buf, cpuLabel, value)
}

// close ends the profile, if stop has not (a nil p: none was started).
func (p *cpuProfile) close() {
	if p != nil && !p.stopped {
		pprof.StopCPUProfile()
		p.stopped = true
	}
}

// labelledCPU reads a CPU profile (gzipped profile.proto, as runtime/pprof
// writes it) and sums the CPU time of its samples, of those labelled key=value
// and of all.
func labelledCPU(r io.Reader, key, value string) (labelled, total time.Duration, err error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return 0, 0, fmt.Errorf("read the CPU profile: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return 0, 0, fmt.Errorf("read the CPU profile: %w", err)
	}
	var types, samples [][]byte
	var strs []string
	err = pbFields(raw, func(f pbField) error {
		switch f.num {
		case 1: // sample_type
			types = append(types, f.b)
		case 2: // sample
			samples = append(samples, f.b)
		case 6: // string_table
			strs = append(strs, string(f.b))
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	cpu := -1 // the sample value that is CPU time, in nanoseconds
	for i, t := range types {
		var typ, unit uint64
		_ = pbFields(t, func(f pbField) error {
			switch f.num {
			case 1:
				typ = f.v
			case 2:
				unit = f.v
			}
			return nil
		})
		if int(typ) < len(strs) && int(unit) < len(strs) && strs[typ] == "cpu" && strs[unit] == "nanoseconds" {
			cpu = i
		}
	}
	if cpu < 0 {
		return 0, 0, errors.New("read the CPU profile: no cpu/nanoseconds sample type")
	}
	for _, s := range samples {
		ns, hasLabel, err := cpuSample(s, cpu, strs, key, value)
		if err != nil {
			return 0, 0, err
		}
		total += time.Duration(ns)
		if hasLabel {
			labelled += time.Duration(ns)
		}
	}
	return labelled, total, nil
}

// cpuSample reads one sample of a profile: its value at index cpu, and whether
// it carries the label key=value.
func cpuSample(b []byte, cpu int, strs []string, key, value string) (ns int64, hasLabel bool, err error) {
	var values []int64
	err = pbFields(b, func(f pbField) error {
		switch {
		case f.num == 2 && f.wire == 0:
			values = append(values, int64(f.v))
		case f.num == 2 && f.wire == 2: // packed
			for rest := f.b; len(rest) > 0; {
				v, n := binary.Uvarint(rest)
				if n <= 0 {
					return errors.New("read the CPU profile: bad packed value")
				}
				values, rest = append(values, int64(v)), rest[n:]
			}
		case f.num == 3 && f.wire == 2:
			var k, s uint64
			_ = pbFields(f.b, func(l pbField) error {
				switch l.num {
				case 1:
					k = l.v
				case 2:
					s = l.v
				}
				return nil
			})
			hasLabel = hasLabel || int(k) < len(strs) && int(s) < len(strs) && strs[k] == key && strs[s] == value
		}
		return nil
	})
	if cpu < len(values) {
		ns = values[cpu]
	}
	return ns, hasLabel, err
}

// pbField is one field of a protocol buffer message: its number, its wire
// type, and its value (v for varints, b for length-delimited bytes).
type pbField struct {
	num, wire int
	v         uint64
	b         []byte
}

// pbFields calls fn with each field of the encoded message b, in order.
func pbFields(b []byte, fn func(pbField) error) error {
	bad := errors.New("read the CPU profile: malformed protocol buffer")
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return bad
		}
		b = b[n:]
		f := pbField{num: int(tag >> 3), wire: int(tag & 7)}
		switch f.wire {
		case 0:
			if f.v, n = binary.Uvarint(b); n <= 0 {
				return bad
			}
			b = b[n:]
		case 1, 5:
			size := 8
			if f.wire == 5 {
				size = 4
			}
			if len(b) < size {
				return bad
			}
			b = b[size:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return bad
			}
			f.b, b = b[n:n+int(l)], b[n+int(l):]
		default:
			return bad
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}
