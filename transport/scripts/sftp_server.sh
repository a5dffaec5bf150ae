# shellcheck shell=sh
# Starts the host's sftp-server as the account this runs as (through sudo
# when the login user is not the account). It takes no arguments.
for p in /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server /usr/libexec/sftp-server /usr/lib/ssh/sftp-server; do
  [ -x "$p" ] && exec "$p"
done
echo "no sftp-server found on this host" >&2; exit 127
