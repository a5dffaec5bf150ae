# shellcheck shell=sh
# probe.sh WINDOW BOOT_ID HZ PAGE MEM BOOT_TIME CPUS USER [PIDFILE KNOWN]...
# One exec that reports the host (H) and each pid file's process (P, X, C,
# and Q over a sampling WINDOW in seconds, 0 for one sample), as ParseProbe
# reads them. BOOT_ID...USER are what is known of the host (see
# probe_host), all empty when nothing is. KNOWN is "PID STARTTICKS" of a
# process a poll before found alive, or "" (see probe_pids).
# include: lib_probe.sh
window=$1; shift
probe_host "$1" "$2" "$3" "$4" "$5" "$6" "$7"; shift 7
probe_pids "$window" $(($# / 2)) "$@"
