# shellcheck shell=sh
# The wrapper of every command an SSH host runs, as
#   sh -c WRAPPER sh SECONDS SCRIPT NAME ARG...
# SCRIPT then runs as `sh -c SCRIPT NAME ARG...`: its arguments reach it as
# data, also through sudo, which resets the environment.
#
# It first writes the start marker to stderr with the process group to kill
# on cancel, reported only when the group is the session sshd made for this
# command (pgid == sid), so a cancel never kills a group it does not own.
#
# With SECONDS (not empty) it also arms a watchdog that kills the group on
# the host itself: the client's kill needs a working connection, and a host
# that is frozen or cut off would otherwise run the command on forever. The
# watchdog only fires if its sleep ran to the end, and is stopped (with its
# sleep, via $!) when the script ends first; its stdio is detached so it
# never holds the session open. The sleep is stopped with KILL: a TERM that
# reaches it between fork and exec meets the trap's handler and is lost.
p=; s=; read -r _ _ _ _ p s _ 2>/dev/null </proc/$$/stat
[ -n "$p" ] && [ "$p" = "$s" ] || p=
printf "%s %s\n" __drover_started__ "$p" >&2
t=$1; shift
if [ -z "$t" ] || [ -z "$p" ]; then exec sh -c "$@"; fi
( trap 'kill -KILL $! 2>/dev/null; exit 0' TERM; sleep "$t" & wait $! && kill -KILL -"$p" ) </dev/null >/dev/null 2>&1 &
w=$!; sh -c "$@"; r=$?; kill $w 2>/dev/null; exit $r
