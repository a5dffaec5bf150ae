# shellcheck shell=sh
# config_md5.sh FILE
# Prints the md5 of FILE as the account reads it, "gone" when there is no
# such file, and nothing when the file is there but cannot be read
# (permission denied, a directory, a read error): drift is a file whose
# content differs or that is gone, as repair judges it (repair, as the
# account too, restores a gone file and refuses an unreadable one), so a
# file the account cannot read is never reported as drifted. A path the
# account cannot stat is gone only when the nearest ancestor it can stat is
# a directory it may search: then the lookup itself found nothing. md5sum
# prints "HASH  PATH", with a leading backslash when PATH needs escaping.
if [ -e "$1" ]; then r=$(md5sum -- "$1") && r=${r#\\} && echo "${r%% *}"; exit; fi
d=$1; while d=$(dirname -- "$d"); [ ! -e "$d" ]; do :; done
[ -d "$d" ] && [ -x "$d" ] && echo gone
