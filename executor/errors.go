package executor

import (
	"errors"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/pool"
)

// Errors callers branch on. All are wrapped with detail (which session,
// which limit and its maximum, what to do); test with errors.Is.
var (
	// ErrUnknownSession: no such session for this owner. Another owner's
	// session is reported the same way, so existence never leaks.
	ErrUnknownSession = errors.New("unknown session")
	// ErrExpiredSession: the session existed for this owner and was removed
	// after its idle TTL or max lifetime.
	ErrExpiredSession = errors.New("session expired")
	// ErrTooManySessions: sessions.max_per_owner or sessions.max_total reached.
	ErrTooManySessions = errors.New("too many sessions")
	// ErrLimitExceeded: a request asked for more than the operator allows
	// (a limit, the code size, the state size) or for a negative limit.
	ErrLimitExceeded = errors.New("limit exceeded")
	// ErrInvalidRequest: malformed input such as state that is not a JSON
	// object.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrInvalidPath: a file path outside the working directory, with "..",
	// or through a symlink that leaves it.
	ErrInvalidPath = errors.New("invalid path")
	// ErrDockerUnavailable: the sandbox backend (the Docker daemon, the
	// Kubernetes API) cannot be reached. It is backend.ErrUnavailable.
	ErrDockerUnavailable = backend.ErrUnavailable
	// ErrImageMissing: the sandbox image does not exist. It is
	// backend.ErrImageMissing.
	ErrImageMissing = backend.ErrImageMissing
	// ErrOutcomeUnknown: a call carrying an idempotency key that an
	// earlier attempt of it already began in the session, on a server that
	// died before it answered: the call may have run, in whole or in part,
	// and is not run again.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrAlreadyRan: a call carrying an idempotency key that an earlier
	// attempt of it ran in the session, answered by the server that ran
	// it (which alone keeps the result); it is not run again.
	ErrAlreadyRan = errors.New("already ran")
	// ErrClosed: the executor was closed. It is the pools' ErrClosed.
	ErrClosed = pool.ErrClosed
)
