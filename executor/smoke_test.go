package executor

import (
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	e, _ := newExec(t, nil)
	t0 := time.Now()
	res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print(1)\n1+1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v %+v", time.Since(t0), res)
}
