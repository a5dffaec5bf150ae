# shellcheck shell=sh
# checked_control.sh MARKFILE REQUEST SETUP CMD SECONDS OPFILES ATTEMPT LAST
#                    ANYEXIT WAIT PIDFILE BOOT_ID HZ PAGE MEM BOOT_TIME CPUS
#                    USER [GUARD ACCOUNT [THEN THEN_WAIT]]
# control.sh, then, when its command completed (with status 0, or any
# status when ANYEXIT is 1), waits WAIT seconds and probes PIDFILE: the
# post-check costs no SSH round trip of its own. The control part's output
# is buffered by the command substitution; it is bounded (the command's
# own output is cut at 4 KiB). The probe follows a line
# "__drover_check__", which no probe line can be.
#
# With GUARD, the op's probe before its command shares the exec too: when
# the script runs as ACCOUNT and GUARD holds for PIDFILE (guard_holds),
# the command runs at once; otherwise nothing is run or written, and the
# script prints "__drover_guard__" and that probe, for the op to judge.
# Its probes report no clock: the op judges the process, not the host.
#
# With THEN (a restart's start_cmd after its stop_cmd), the output starts
# with a line of the script's own: "__drover_then__" when the command
# ended, PIDFILE then names no live process (at once, or after WAIT) and
# the op was not cancelled;
# THEN then runs in this exec, and what follows is its output and its
# check after THEN_WAIT, as for CMD. Otherwise "__drover_alone__", and
# CMD's output and check follow, for the op to go on from.
# include: lib_control.sh
# include: lib_probe.sh
# shellcheck disable=SC2034 # read by probe_host
noclock=1 u=${18}
if [ -n "${19-}" ]; then
  user_as "${20-}"
  if [ "$u" != "${20-}" ] || ! guard_holds "${19}" "${11}"; then
    printf '__drover_guard__\n'
    probe_host "${12}" "${13}" "${14}" "${15}" "${16}" "${17}" "$u"
    probe_pids 0 1 "${11}" ""
    exit 0
  fi
fi
c=$(mark "$1" "$2"; control "$3" "$4" "$5" "$6" "$7" "$8")
w=${10}
case $c in
*"__drover_rc__ rc=0 timeout=0") go=1 ;;
# Not a setup failure, which ends with setup=...
*" timeout=0") go=$9 ;;
*) go=0 ;;
esac
if [ -n "${21-}" ]; then
  # A process may outlive its stop signal for a moment: it gets up to the
  # stop's check time, looked at each 0.1 s so a quick exit costs no more,
  # and the stop's own check then needs no wait of its own. WAIT has
  # three decimals: its first is the tenths.
  if [ "$go" = 1 ] && [ "$w" != 0 ]; then
    t=${w#*.}; n=$((${w%.*} * 10 + ${t%??})) i=0; [ "$n" -gt 0 ] || n=1
    while [ "$i" -lt "$n" ] && ! guard_holds none "${11}"; do sleep 0.1; i=$((i+1)); done
    w=0
  fi
  if [ "$go" = 1 ] && guard_holds none "${11}" && { [ -z "$6" ] || [ ! -e "$6.cancelled" ]; }; then
    printf '__drover_then__\n'
    c=$(control "$3" "${21}" "$5" "$6" "$7" "$8")
    case $c in *"__drover_rc__ rc=0 timeout=0") ;; *) go=0 ;; esac
    w=${22}
  else
    printf '__drover_alone__\n'
  fi
fi
printf '%s\n' "$c"
[ "$go" = 1 ] || exit 0
printf '__drover_check__\n'
[ "$w" = 0 ] || sleep "$w"
probe_host "${12}" "${13}" "${14}" "${15}" "${16}" "${17}" "$u"
probe_pids 0 1 "${11}" ""
