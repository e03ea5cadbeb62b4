package docker

import (
	"context"
	"errors"
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Define creates spec's container without attaching or starting it (the
// create call is not cancelled with ctx, as in Create).
func (b *Backend) Define(ctx context.Context, spec backend.Spec) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", err
	}
	cfg, host := ContainerConfig(spec)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	created, err := b.api.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if err != nil {
		return "", Err("create sandbox", spec.Image, err)
	}
	return created.ID, nil
}

// AttachDefined attaches stdin and stdout of a defined container; stderr
// is dropped. Closing the sandbox, or ctx's end, ends the attach.
func (b *Backend) AttachDefined(ctx context.Context, id string) (*backend.Sandbox, error) {
	att, err := b.api.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, Err("attach sandbox", "", err)
	}
	conn := att.HijackedResponse
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, conn.Reader)
		pw.CloseWithError(errors.Join(err, io.EOF))
	}()
	return backend.NewSandbox(id, stdin{&conn}, pr, eofReader{}, func() error {
		stop()
		conn.Close()
		pr.Close()
		return nil
	}), nil
}

// eofReader is a stream that was not attached.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// Await registers a wait for the container's next exit.
func (b *Backend) Await(ctx context.Context, id string) func() (int, error) {
	wait := b.api.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	return func() (int, error) {
		select {
		case res := <-wait.Result:
			return int(res.StatusCode), nil
		case err := <-wait.Error:
			return -1, Err("wait for sandbox", "", err)
		}
	}
}

// Start starts a defined container.
func (b *Backend) Start(ctx context.Context, id string) error {
	if _, err := b.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return Err("start sandbox", "", err)
	}
	return nil
}
