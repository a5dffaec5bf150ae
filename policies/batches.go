package policies

import "github.com/drover-sh/drover/proc"

// HostBatches splits items into batches of about size items, every host's
// items in one batch and in their order, hosts in the order they first
// appear: a host runs its ops one at a time, so its items in two batches
// would only wait on each other. A batch closes once it holds size items
// or more.
func HostBatches(items []proc.Item, size int) [][]int {
	size = max(size, 1)
	at := map[proc.HostID]int{}
	var hosts [][]int
	for i, it := range items {
		h := it.Target.HostID()
		n, ok := at[h]
		if !ok {
			n = len(hosts)
			at[h] = n
			hosts = append(hosts, nil)
		}
		hosts[n] = append(hosts[n], i)
	}
	var out [][]int
	var cur []int
	for _, idx := range hosts {
		cur = append(cur, idx...)
		if len(cur) >= size {
			out = append(out, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// DeliverPerConnection bounds the updates one worker has in flight to the
// hosts that share one SSH connection (identities of one address), which
// runs sessions execs at once. Twice that keeps the connection busy while
// answers travel; an update past it would only wait in the worker, its
// host's workflow task open, while the server, sent more than hosts can
// run, times out heartbeats and signals: at 10,000 identities on 20
// addresses, 1,000 in flight left batches' answers lost for minutes.
func DeliverPerConnection(sessions int) int { return 2 * max(sessions, 1) }
