package policies

// Bounds of the SSH pool sized from the open-file limit.
const (
	// poolFileReserve is left for everything but pooled connections: the
	// engine's gRPC connections, SFTP transfers, log and inventory files.
	poolFileReserve = 1024
	// minPooled keeps a pool useful under a tight limit.
	minPooled = 256
	// maxPooled bounds the worker's memory (about 50 KB a
	// connection) where the limit is effectively unbounded.
	maxPooled = 65536
)

// PooledConnections is how many SSH connections a worker keeps open when
// max_pooled_connections is not set: one for every host of its fleet, as
// far as its open-file limit allows after the dials in flight and a
// reserve. A pool smaller than the fleet redials most hosts on every op,
// which costs each host's sshd a handshake (about 10 ms of CPU) per op.
func PooledConnections(openFiles uint64, dials int) int {
	if dials < 0 {
		dials = 0
	}
	spare := uint64(poolFileReserve + dials)
	if openFiles <= spare+minPooled {
		return minPooled
	}
	if n := openFiles - spare; n < maxPooled {
		return int(n)
	}
	return maxPooled
}
