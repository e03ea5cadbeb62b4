package cost

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// playsRunner is a stepper whose one sandbox plays the runner: once
// started it sends the ready frame, then answers one preload (after the
// preamble) with stdlib; an empty container exits with exit. It is also
// the executor's side (Sandboxes), recording what it was asked.
type playsRunner struct {
	exit   int
	askFor bool // AskCode's answer
	failed error

	mu       sync.Mutex
	spec     backend.Spec
	defined  int
	removed  int
	requests []protocol.Preload
	answered []string // the stdlib of each reply Answered took
	stdin    *io.PipeReader
	stdout   *io.PipeWriter
	served   chan struct{}
}

func (p *playsRunner) Ready(ctx context.Context, edit func(*backend.Spec)) (func(context.Context) (string, func(), error), error) {
	if p.failed != nil {
		return nil, p.failed
	}
	spec := backend.Spec{Image: "img", Command: []string{"runner"}}
	if edit != nil {
		edit(&spec)
	}
	return func(context.Context) (string, func(), error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.spec = spec
		p.defined++
		once := sync.Once{}
		return "sb1", func() {
			once.Do(func() {
				p.mu.Lock()
				p.removed++
				p.mu.Unlock()
			})
		}, nil
	}, nil
}

func (p *playsRunner) Preamble(stdin io.Writer) {
	protocol.WritePreamble(stdin, "source", nil, [4]byte{})
}
func (p *playsRunner) AskCode() bool { return p.askFor }
func (p *playsRunner) Answered(ctx context.Context, reply *protocol.Reply) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answered = append(p.answered, reply.Stdlib)
}

func (p *playsRunner) Define(ctx context.Context, spec backend.Spec) (string, error) {
	return "", errors.New("not used: Ready defines")
}

func (p *playsRunner) AttachDefined(ctx context.Context, id string) (*backend.Sandbox, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p.stdin, p.stdout = inR, outW
	return backend.NewSandbox(id, inW, outR, nil, func() error {
		inR.Close()
		outW.Close()
		return nil
	}), nil
}

func (p *playsRunner) Await(ctx context.Context, id string) func() (int, error) {
	return func() (int, error) { return p.exit, nil }
}

func (p *playsRunner) Start(ctx context.Context, id string) error {
	if p.stdout == nil {
		return nil // an empty container: nothing attached
	}
	p.served = make(chan struct{})
	go func() {
		defer close(p.served)
		// As the runner: the preamble is read before the ready frame, so
		// the request that follows the ready frame comes after it.
		if protocol.SkipPreamble(p.stdin) != nil || protocol.WriteFrame(p.stdout, protocol.Ready{Op: "ready"}) != nil {
			return
		}
		data, err := protocol.ReadFrame(p.stdin, func() int64 { return 1 << 20 })
		if err != nil {
			return
		}
		var req protocol.Preload
		json.Unmarshal(data, &req)
		p.mu.Lock()
		p.requests = append(p.requests, req)
		p.mu.Unlock()
		protocol.WriteFrame(p.stdout, map[string]any{"id": req.ID, "nonce": req.Nonce, "status": "ok", "failed": []string{}, "stdlib": "/usr/lib/python3.13"})
	}()
	return nil
}

// countingCPU is a cpu function whose every reading is one millisecond
// more than the last, so each phase should show 1 ms.
func countingCPU() func() time.Duration {
	var n time.Duration
	return func() time.Duration { n += time.Millisecond; return n }
}

func checkPhases(t *testing.T, ph []Phase, names ...string) {
	t.Helper()
	var got []string
	for _, p := range ph {
		got = append(got, p.Name)
		if p.Wall < 0 || p.CPU != time.Millisecond {
			t.Errorf("phase %s: wall %v, CPU %v; want wall >= 0 and CPU 1ms (one reading)", p.Name, p.Wall, p.CPU)
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("phases %v, want %v", got, names)
	}
}

func TestSandbox(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		preload  bool
		ask      bool
		phases   []string
		requests []protocol.Preload // ID and Nonce left out
	}{
		{"preload, asking for the code", true, true, []string{"create", "attach", "start", "ready", "preload", "remove"},
			[]protocol.Preload{{Modules: []string{"numpy"}, RunnerCode: true}}},
		{"preload", true, false, []string{"create", "attach", "start", "ready", "preload", "remove"},
			[]protocol.Preload{{Modules: []string{"numpy"}}}},
		{"asking for the code only: left out of the phases", false, true, []string{"create", "attach", "start", "ready", "remove"},
			[]protocol.Preload{{Modules: []string{}, RunnerCode: true}}},
		{"neither", false, false, []string{"create", "attach", "start", "ready", "remove"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &playsRunner{askFor: tc.ask}
			ph, err := Sandbox(ctx, p, p, []string{"numpy"}, tc.preload, countingCPU())
			if err != nil {
				t.Fatal(err)
			}
			checkPhases(t, ph, tc.phases...)
			<-p.served
			for i := range p.requests {
				if p.requests[i].ID == 0 || len(p.requests[i].Nonce) != 32 || p.requests[i].Op != protocol.OpPreload {
					t.Errorf("request %+v: want an id, a 16-byte nonce and op preload", p.requests[i])
				}
				p.requests[i].Header = protocol.Header{}
			}
			if diff := cmp.Diff(tc.requests, p.requests); diff != "" {
				t.Errorf("requests the runner got (-want +got):\n%s", diff)
			}
			if want := map[bool][]string{true: {"/usr/lib/python3.13"}}[tc.ask]; !slices.Equal(p.answered, want) {
				t.Errorf("Answered took %v, want %v", p.answered, want)
			}
			if p.defined != 1 || p.removed != 1 || !slices.Equal(p.spec.Command, []string{"runner"}) {
				t.Errorf("defined %d, removed %d, command %q; want one sandbox of the spec as readied, removed", p.defined, p.removed, p.spec.Command)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	ctx := context.Background()
	p := &playsRunner{}
	ph, err := Empty(ctx, p, p, []string{"true"}, countingCPU())
	if err != nil {
		t.Fatal(err)
	}
	checkPhases(t, ph, "create", "start", "exit", "remove")
	if !slices.Equal(p.spec.Command, []string{"true"}) || p.removed != 1 {
		t.Errorf("command %q, removed %d; want true, removed once", p.spec.Command, p.removed)
	}

	p = &playsRunner{exit: 1}
	_, err = Empty(ctx, p, p, []string{"false"}, countingCPU())
	if err == nil || !strings.Contains(err.Error(), `"false" exited with status 1`) || !strings.Contains(err.Error(), "the image img") {
		t.Errorf("Empty of a command that fails: %v; want an error naming the command, its status and the image", err)
	}
	if p.removed != 1 {
		t.Errorf("removed %d after the failure, want 1", p.removed)
	}

	p = &playsRunner{failed: errors.New("no namespace")}
	if _, err := Empty(ctx, p, p, []string{"true"}, countingCPU()); err == nil || p.defined != 0 {
		t.Errorf("Empty when Ready fails: %v, %d defined; want its error and nothing defined", err, p.defined)
	}
}
