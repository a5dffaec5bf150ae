# shellcheck shell=sh
# signal.sh MARKFILE REQUEST PID STARTTICKS SIGNAL HALFSECONDS
# Writes the op's marker (MARKFILE "": none), then sends SIGNAL to the
# process group of PID, falling back to PID alone when the group is the
# script's own or init's. It first checks that PID is still the
# incarnation that was probed (its start time), so a reused pid is never
# signalled. With HALFSECONDS > 0 it then waits up to that many half
# seconds for the process to exit and sends KILL if it has not.
# include: lib_control.sh
mark "$1" "$2"
pid=$3 want=$4 sig=$5 half=$6
st=$(cat "/proc/$pid/stat" 2>/dev/null) || exit 0
# shellcheck disable=SC2086 # the stat's fields, one word each
set -- ${st##*) }
[ "${20}" = "$want" ] || exit 0
pg=$3
mine=$(cut -d' ' -f5 /proc/$$/stat 2>/dev/null)
if [ "$pg" -gt 1 ] && [ "$pg" != "$mine" ]; then kill -"$sig" -"$pg" 2>/dev/null || kill -"$sig" "$pid"; else kill -"$sig" "$pid"; fi
# Waited for by pid and start time: a pid comes round again on a busy host.
i=0
# shellcheck disable=SC2154 # so is set by startof (lib_control.sh)
while [ $i -lt "$half" ] && startof "$pid" && [ "$so" = "$want" ]; do sleep 0.5; i=$((i+1)); done
startof "$pid"
if [ "$half" -gt 0 ] && [ "$so" = "$want" ]; then
  if [ "$pg" -gt 1 ] && [ "$pg" != "$mine" ]; then kill -KILL -"$pg" 2>/dev/null; fi
  kill -KILL "$pid" 2>/dev/null
fi
exit 0
