# shellcheck shell=sh
# status.sh WINDOW PIDFILE SETUP VERSION_CMD HEALTH_CMD BOOT_ID HZ PAGE MEM
#           BOOT_TIME CPUS USER ACCOUNT KNOWN
# The status op's probe: probe.sh of one pid file (BOOT_ID...ACCOUNT as
# probe_host takes them, KNOWN as probe_pids does), then, when VERSION_CMD
# or HEALTH_CMD is given, run in SETUP and each bounded to 10 s, the first
# line of version_cmd (V) and the exit status of health_cmd (Z; 0 with no
# health_cmd), as parseExtras reads them.
# include: lib_probe.sh
probe_host "$6" "$7" "$8" "$9" "${10}" "${11}" "${12}" "${13-}"
probe_pids "$1" 1 "$2" "${14-}"
setup=$3 version=$4 health=$5
[ -n "$version" ] || [ -n "$health" ] || exit 0
cd "$setup" 2>/dev/null || true
if [ -n "$version" ]; then
  v=$(timeout 10 sh -c "$version" 2>/dev/null </dev/null | head -n 1 | tr '\t' ' ' | head -c 256); printf 'V\t%s\n' "$v"
fi
if [ -n "$health" ]; then
  timeout 10 sh -c "$health" </dev/null >/dev/null 2>&1; printf 'Z\t%d\n' $?
else
  printf 'Z\t0\n'
fi
