package quota

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// pending is an Acquire started by acquireAsync.
type pending struct {
	done    chan struct{}
	release func()
	err     error
}

func acquireAsync(f *Fair, ctx context.Context, p string) *pending {
	a := &pending{done: make(chan struct{})}
	w0, _ := f.Waiting(p)
	go func() {
		a.release, a.err = f.Acquire(ctx, p)
		close(a.done)
	}()
	// wait until it is queued or done, so that the order is known
	for {
		select {
		case <-a.done:
			return a
		default:
		}
		if w, _ := f.Waiting(p); w > w0 {
			return a
		}
		runtime.Gosched()
	}
}

func (a *pending) granted() bool {
	select {
	case <-a.done:
		return a.err == nil
	default:
		return false
	}
}

func (a *pending) wait(t *testing.T) {
	t.Helper()
	<-a.done
	if a.err != nil {
		t.Fatal(a.err)
	}
}

// A principal runs at most its share of the slots however many requests
// it queues; another principal gets a free slot at once, and is next
// when a slot frees, ahead of the first principal's queue.
func TestFairShare(t *testing.T) {
	f := NewFair(2, 1)
	ctx := context.Background()
	a1, err := f.Acquire(ctx, "attacker")
	if err != nil {
		t.Fatal(err)
	}
	var queued []*pending
	for range 5 {
		queued = append(queued, acquireAsync(f, ctx, "attacker"))
	}
	for i, q := range queued {
		if q.granted() {
			t.Fatalf("the attacker's request %d got a second slot", i)
		}
	}
	o1 := acquireAsync(f, ctx, "other")
	o1.wait(t) // the free slot, at once
	// both slots busy: the other's next request waits, then comes first
	o2 := acquireAsync(f, ctx, "other")
	if o2.granted() {
		t.Fatal("a third slot was given")
	}
	o1.release()
	o2.wait(t)
	for i, q := range queued {
		if q.granted() {
			t.Fatalf("the attacker's request %d took the other's freed slot", i)
		}
	}
	// the attacker's queue moves one at a time, in order
	a1()
	queued[0].wait(t)
	for i, q := range queued[1:] {
		if q.granted() {
			t.Fatalf("the attacker's request %d ran beside its first", i+1)
		}
	}
	queued[0].release()
	queued[1].wait(t)
	queued[1].release()
	queued[1].release() // a second release gives nothing back
	queued[2].wait(t)
	if w, r := f.Waiting("attacker"); w != 2 || r != 1 {
		t.Fatalf("attacker: %d waiting, %d running; want 2, 1", w, r)
	}
	o2.release()
	for _, q := range queued[2:] {
		q.wait(t)
		q.release()
	}
	if f.busy != 0 || len(f.held) != 0 || len(f.waiting) != 0 {
		t.Fatalf("after every release: busy %d, held %v, waiting %v", f.busy, f.held, f.waiting)
	}
}

// A request whose context ends while it waits leaves the queue with the
// context's error, and the requests behind it still get their slots.
func TestFairCancelWhileWaiting(t *testing.T) {
	f := NewFair(1, 1)
	r1, err := f.Acquire(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := acquireAsync(f, ctx, "alice")
	b := acquireAsync(f, context.Background(), "bob")
	cancel()
	<-c.done
	if !errors.Is(c.err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v, want context.Canceled", c.err)
	}
	if w, _ := f.Waiting("alice"); w != 0 {
		t.Fatalf("alice still has %d waiting after the cancel", w)
	}
	r1()
	b.wait(t)
	b.release()
	if f.busy != 0 || len(f.waiting) != 0 {
		t.Fatalf("after every release: busy %d, waiting %v", f.busy, f.waiting)
	}
}

// A context that ends as the slot is granted gives the slot to the next.
func TestFairCancelAfterGrant(t *testing.T) {
	f := NewFair(1, 1)
	for range 200 {
		r1, _ := f.Acquire(context.Background(), "alice")
		ctx, cancel := context.WithCancel(context.Background())
		c := acquireAsync(f, ctx, "bob")
		go cancel()
		r1()
		<-c.done
		if c.err == nil {
			c.release()
		}
		r, err := f.Acquire(context.Background(), "carol")
		if err != nil {
			t.Fatal(err)
		}
		r()
		if f.busy != 0 {
			t.Fatalf("a slot was lost: busy %d", f.busy)
		}
	}
}

// A held slot counts as the principal's until a later step takes it
// over and gives it back; Release after Take, a second Take, and a Fair
// other than the one that holds it change nothing.
func TestFairHeld(t *testing.T) {
	f, other := NewFair(2, 1), NewFair(2, 1)
	ctx, h, err := f.Hold(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Take(ctx); ok {
		t.Error("another Fair took the slot")
	}
	other.Release(ctx)
	if _, running := f.Waiting("a"); running != 1 {
		t.Fatalf("a runs %d slots after Hold and another Fair's Release, want 1", running)
	}
	next := acquireAsync(f, context.Background(), "a")
	if next.granted() {
		t.Fatal("a's second request got a slot while its first holds its share")
	}
	release, ok := f.Take(ctx)
	if !ok {
		t.Fatal("Take found no held slot")
	}
	if _, again := f.Take(ctx); again {
		t.Error("the slot was taken twice")
	}
	h.Release() // taken over: not the Held's to give back
	f.Release(ctx)
	if next.granted() {
		t.Fatal("Release after Take gave the slot back")
	}
	release()
	next.wait(t)
	next.release()
	if _, running := f.Waiting("a"); running != 0 {
		t.Errorf("a runs %d slots after all were given back, want 0", running)
	}

	// released without a taker: the slot is free once
	ctx, h, _ = f.Hold(context.Background(), "b")
	f.Release(ctx)
	h.Release()
	if _, ok := f.Take(ctx); ok {
		t.Error("a released slot was taken")
	}
	if _, running := f.Waiting("b"); running != 0 {
		t.Errorf("b runs %d slots after Release, want 0", running)
	}
}

// A principal's requests past its burst wait their turn, and the work
// charged to it delays its next ones; another principal's do not wait.
func TestPace(t *testing.T) {
	p := NewPace(1, 2, 2) // one a second after a burst of two
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	done, cancel := context.WithCancel(context.Background())
	cancel() // a request that would wait gives up at once
	for i := range 2 {
		if err := p.Wait(done, "a"); err != nil {
			t.Fatalf("a's request %d of its burst of 2: %v", i+1, err)
		}
	}
	if err := p.Wait(done, "a"); err == nil {
		t.Fatal("a's third request within the same second did not wait")
	}
	if err := p.Wait(done, "b"); err != nil {
		t.Fatalf("b's first request waited behind a's: %v", err)
	}
	now = now.Add(10 * time.Second) // a is quiet: its burst is back
	if err := p.Wait(done, "a"); err != nil {
		t.Fatalf("a's request after a quiet while: %v", err)
	}
	p.Charge("a", 2*time.Second) // 4 s of its pace
	now = now.Add(2 * time.Second)
	if err := p.Wait(done, "a"); err == nil {
		t.Fatal("a's request 2 s after it was charged 2 s of work (factor 2) did not wait")
	}
	now = now.Add(5 * time.Second)
	if err := p.Wait(done, "a"); err != nil {
		t.Fatalf("a's request once its charge was paid: %v", err)
	}
	if err := NewPace(0, 1, 2).Wait(done, "a"); err != nil {
		t.Errorf("a Pace of no rate waited: %v", err)
	}
}

// A Fair reports how long each slot was held to its OnRelease.
func TestFairOnRelease(t *testing.T) {
	f := NewFair(1, 1)
	var got []string
	f.OnRelease(func(p string, held time.Duration) {
		if held < 0 {
			t.Errorf("%s held its slot %v", p, held)
		}
		got = append(got, p)
	})
	release, err := f.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	release()
	release()
	if len(got) != 1 || got[0] != "a" {
		t.Errorf("OnRelease saw %v, want [a] (once per slot)", got)
	}
}
