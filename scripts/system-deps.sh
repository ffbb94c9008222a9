#!/usr/bin/env bash
# System packages the tests need, from Debian: a PostgreSQL server (the database tests start a
# throwaway cluster with its initdb/pg_ctl), Chromium (the dashboard's browser test drives it
# with Playwright), and an SSH server with rsync (the cluster-launcher test runs `ray up` against
# an sshd on 127.0.0.1). Installs only what is missing; needs root or sudo.
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing ${need[*]} (apt-get)"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
