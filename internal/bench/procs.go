package bench

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// process is a rollboot process the bench started, to measure it as the kernel
// sees it (/proc/<pid>/status and /proc/<pid>/stat).
type process struct {
	cmd *exec.Cmd
	dir string
}

// startProcess runs `exe <command> -config <file>` with hcl as the file, and env
// added to the bench's environment; its output goes to a file in a temporary
// folder, removed by stop.
func startProcess(ctx context.Context, exe, command, hcl string, log *slog.Logger, env ...string) (*process, error) {
	dir, err := os.MkdirTemp("", "rollboot-bench-")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "rollboot.hcl")
	if err := os.WriteFile(cfg, []byte(hcl), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "output"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, exe, command, "-config", cfg)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(append(os.Environ(), "NOMAD_TOKEN=", "NOMAD_ADDR="), env...)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start rollboot %s: %w", command, err)
	}
	log.Debug("bench process started", "command", command, "pid", cmd.Process.Pid)
	return &process{cmd: cmd, dir: dir}, nil
}

// tail is the end of the process's output, to say why it failed.
func (p *process) tail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "output"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

func (p *process) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	os.RemoveAll(p.dir)
}

// procStatus is what the kernel says of a process.
type procStatus struct {
	hwm, rss int64 // peak and current resident set, bytes (VmHWM, VmRSS)
	// The current resident set's anonymous pages (heap, stacks) and file
	// pages (the binary's code and read-only data, shared libraries).
	anon, file int64
	cpu        time.Duration
}

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on
// every Linux architecture Go supports (the kernel's ABI, whatever HZ is).
const clockTick = 10 * time.Millisecond

func (p *process) status() (procStatus, error) {
	var st procStatus
	pid := p.cmd.Process.Pid
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, fmt.Errorf("process %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmHWM":
			st.hwm = n * 1024
		case "VmRSS":
			st.rss = n * 1024
		case "RssAnon":
			st.anon = n * 1024
		case "RssFile":
			st.file = n * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, fmt.Errorf("process %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces: fields count from its ")".
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return st, fmt.Errorf("process %d: short /proc stat", pid)
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(fields[12], 10, 64) // field 15
	st.cpu = time.Duration(utime+stime) * clockTick
	return st, nil
}
