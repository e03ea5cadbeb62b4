package backend

// Labels every sandbox carries. Kind is "transient" or "persistent" (every
// container and volume of python-docker-mcp, of this version and every
// earlier one, carries LabelKind: a backend's List(nil) selects on it);
// Session is the session id of a persistent sandbox; Owner the principal;
// Created an RFC 3339 time; Instance, PID and Host identify the executor
// that started it, so a restarted server reaps only containers whose
// executor is gone.
const (
	LabelKind     = "python-docker-mcp.kind"
	LabelSession  = "python-docker-mcp.session"
	LabelOwner    = "python-docker-mcp.owner"
	LabelCreated  = "python-docker-mcp.created"
	LabelInstance = "python-docker-mcp.instance"
	LabelPID      = "python-docker-mcp.pid"
	LabelHost     = "python-docker-mcp.host"
)

// Sandbox kinds, the value of LabelKind.
const (
	KindTransient  = "transient"
	KindPersistent = "persistent"
)

// Kinds of what the Docker backend makes for itself: the containers that
// hold shared network namespaces (loopback only) for transient sandboxes,
// the volume that holds a copy of the image's interpreter tree and the
// container that fills it, and the per-server standard library volumes of
// older servers, which the reaper still removes.
const (
	KindNetwork = "network"
	KindTree    = "tree"
	KindStdlib  = "stdlib"
)
