# shellcheck shell=sh
# probe.sh WINDOW [PIDFILE KNOWN]...
# One exec that reports the host (H) and each pid file's process (P, X, C,
# and Q over a sampling WINDOW in seconds, 0 for one sample), as ParseProbe
# reads them. KNOWN is "PID STARTTICKS" of a process a poll before found
# alive, or "" (see probe_pids).
# include: lib_probe.sh
window=$1; shift
probe_host
probe_pids "$window" $(($# / 2)) "$@"
