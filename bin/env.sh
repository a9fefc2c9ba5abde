# shellcheck shell=bash
# Chooses, builds once and enters the environment the whole TFX 1.21 stack runs in.
#
# tfx 1.21's ml-metadata and TFDV wheels need glibc >= 2.38 and libstdc++ with CXXABI_1.3.15. A host that has
# them (or macOS arm64) gets a plain uv venv; any other Linux host gets a Debian 13 userland made by
# debootstrap and entered with bwrap, the checkout bound at its own absolute path so paths agree inside.
# Userland, venv and uv cache live in HFTFX_ENV_CACHE (outside the clone) so fresh clones reuse them; the
# venv is keyed by the lock's hash and holds only the locked dependencies, the checkout goes on PYTHONPATH.
#
# Knobs: HFTFX_ENV_CACHE (cache folder), HFTFX_ENV_MODE (host|userland, default: detected),
# HFTFX_DEBIAN_MIRROR (default http://deb.debian.org/debian).
#
# Certificates: every download trusts the machine's own store, so a network that inspects TLS with a CA the
# machine trusts works with no variables set. uv ships its own roots unless told UV_SYSTEM_CERTS=1; pip and
# Python's ssl read the system bundle (inside the userland, the host's bundle bound at the same path).

HFTFX_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
HFTFX_ENV_CACHE=${HFTFX_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hf-tfx-pipeline}
HFTFX_UV_VERSION=$(sed -n 's/^uv==\([^ ]*\).*/\1/p' "$HFTFX_ROOT/bin/uv-requirements.txt")  # pinned with its hashes there
HFTFX_USERLAND_SUITE=trixie
HFTFX_USERLAND_PACKAGES=python3,python3-venv,python3-dev,g++,ca-certificates
HFTFX_DEBIAN_MIRROR=${HFTFX_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# How every uv call of the project runs: the system trust store, our cache, no interpreter downloads.
HFTFX_UV_ENV=(UV_SYSTEM_CERTS=1 UV_CACHE_DIR="$HFTFX_ENV_CACHE/uv-cache" UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1)

_say() { printf '[hftfx env] %s\n' "$*" >&2; }
# The system CA bundle (Debian/Ubuntu, Fedora/RHEL, openSUSE, Alpine paths), or nothing on a host without one.
_system_ca_bundle() {
  local ca
  for ca in "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt \
    /etc/ssl/ca-bundle.pem /etc/ssl/cert.pem; do
    [ -n "$ca" ] && [ -f "$ca" ] && { echo "$ca"; return 0; }
  done
  return 0
}
# Runs "$@" with its stderr shown and copied to the file $1; returns the command's status.
_run_logged() {
  local log=$1 rc
  shift
  { "$@" 2>&1 1>&3 3>&- | tee "$log" 1>&2 3>&-; rc=${PIPESTATUS[0]}; } 3>&1
  return "$rc"
}
# One line a person can act on when a download failed on certificates or a proxy.
_tls_hint() {
  grep -qiE 'certificate|UnknownIssuer|SSL|tls|proxy' "$1" 2>/dev/null || return 0
  _say "the download failed on TLS or a proxy: make sure the CA that signs your network's certificates is in the" \
    "system store ($(_system_ca_bundle)) and, behind a proxy, that HTTPS_PROXY is set; uv already runs with" \
    "UV_SYSTEM_CERTS=1 (the system store)"
}
_die() { printf '[hftfx env] error: %s\n' "$*" >&2; exit 1; }
_hash() { sha256sum | cut -c1-16; }

# True when this host can load ml-metadata / TFDV 1.21 wheels directly.
_host_can_load_stack() {
  case "$(uname -s)/$(uname -m)" in
    Darwin/arm64) return 0 ;;
    Linux/*) ;;
    *) return 1 ;;
  esac
  local glibc libstdcxx
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  [ -n "$glibc" ] || return 1
  [ "$(printf '%s\n2.38\n' "$glibc" | sort -V | head -n1)" = 2.38 ] || return 1
  libstdcxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 / {print $NF; exit}')
  [ -n "$libstdcxx" ] && grep -qa 'CXXABI_1\.3\.15' "$libstdcxx" || return 1
  python3 -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 14))' 2>/dev/null
}

hftfx_env_mode() {
  case "${HFTFX_ENV_MODE:-}" in
    host|userland) echo "$HFTFX_ENV_MODE" ;;
    "") if _host_can_load_stack; then echo host; else echo userland; fi ;;
    *) _die "HFTFX_ENV_MODE must be 'host' or 'userland', not '$HFTFX_ENV_MODE'" ;;
  esac
}

# uv itself, installed from PyPI into the cache; its manylinux binary also runs inside the userland.
_ensure_uv() {
  HFTFX_UV="$HFTFX_ENV_CACHE/tools/uv-$HFTFX_UV_VERSION/bin/uv"
  [ -x "$HFTFX_UV" ] && return 0
  _say "installing uv $HFTFX_UV_VERSION into $HFTFX_ENV_CACHE/tools"
  local staging="$HFTFX_ENV_CACHE/tools/.uv-$HFTFX_UV_VERSION.$$"
  rm -rf "$staging"
  local ca log="$HFTFX_ENV_CACHE/tools/pip-uv.log"
  local -a cert=()
  ca=$(_system_ca_bundle)
  [ -n "$ca" ] && cert=(--cert "$ca")
  _run_logged "$log" python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    "${cert[@]}" --target "$staging" --require-hashes -r "$HFTFX_ROOT/bin/uv-requirements.txt" \
    || { _tls_hint "$log"; _die "could not install uv with 'python3 -m pip'; install uv $HFTFX_UV_VERSION or python3-pip first"; }
  mv -T "$staging" "$HFTFX_ENV_CACHE/tools/uv-$HFTFX_UV_VERSION"
}

_ensure_userland_tools() {
  command -v debootstrap >/dev/null && command -v bwrap >/dev/null && return 0
  [ "$(id -u)" = 0 ] || _die "need debootstrap and bubblewrap: run 'sudo apt-get install debootstrap bubblewrap'"
  command -v apt-get >/dev/null || _die "need debootstrap and bubblewrap (bwrap) installed on this host"
  _say "installing debootstrap and bubblewrap with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap bubblewrap >/dev/null
}

# A Debian 13 userland with python3.13, its headers and g++ (pyfarmhash builds from source).
_ensure_userland() {
  local recipe key staging
  recipe="$HFTFX_USERLAND_SUITE minbase $HFTFX_USERLAND_PACKAGES"
  key=$(printf '%s' "$recipe" | _hash)
  HFTFX_ROOTFS="$HFTFX_ENV_CACHE/userland-$HFTFX_USERLAND_SUITE-$key"
  [ -f "$HFTFX_ROOTFS/.hftfx-complete" ] && return 0
  _ensure_userland_tools
  [ "$(id -u)" = 0 ] || _die "building the Debian 13 userland needs root (debootstrap); run 'sudo make setup' once"
  staging="$HFTFX_ROOTFS.partial"
  rm -rf "$staging" "$HFTFX_ROOTFS"
  _say "host glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}') is older than 2.38: building a Debian 13 userland (about a minute)"
  debootstrap --variant=minbase --include="$HFTFX_USERLAND_PACKAGES" "$HFTFX_USERLAND_SUITE" "$staging" \
    "$HFTFX_DEBIAN_MIRROR" >"$HFTFX_ENV_CACHE/debootstrap.log" 2>&1 \
    || _die "debootstrap failed; see $HFTFX_ENV_CACHE/debootstrap.log"
  rm -rf "$staging/var/cache/apt/archives/"*.deb
  touch "$staging/.hftfx-complete"
  mv -T "$staging" "$HFTFX_ROOTFS"
}

# Runs "$@" in the environment: PATH, PYTHONPATH and the process variables every process needs.
_exec_in() {
  local path="$HFTFX_VENV/bin:$HFTFX_ROOT/bin/env-bin:/usr/local/bin:/usr/bin:/bin"
  local -a vars=(
    PATH "$path" PYTHONPATH "$HFTFX_ROOT${PYTHONPATH:+:$PYTHONPATH}" VIRTUAL_ENV "$HFTFX_VENV"
    TF_USE_LEGACY_KERAS 1 HFTFX_ENV_DESCRIPTION "$HFTFX_ENV_DESCRIPTION" HFTFX_ENV_CACHE "$HFTFX_ENV_CACHE"
    HFTFX_UV "${HFTFX_UV:-}"
  )
  if [ "$HFTFX_MODE" = host ]; then
    local -a assigns=()
    local i
    for ((i = 0; i < ${#vars[@]}; i += 2)); do assigns+=("${vars[i]}=${vars[i + 1]}"); done
    exec env -u PYTHONHOME "${assigns[@]}" "$@"
  fi
  local -a args=(
    --bind "$HFTFX_ROOTFS" / --dev-bind /dev /dev --proc /proc --ro-bind /sys /sys
    --bind /tmp /tmp --bind "$HOME" "$HOME" --bind "$HFTFX_ENV_CACHE" "$HFTFX_ENV_CACHE"
    --bind "$HFTFX_ROOT" "$HFTFX_ROOT" --ro-bind /etc/resolv.conf /etc/resolv.conf
    --unsetenv PYTHONHOME --die-with-parent --chdir "$PWD"
  )
  local ca
  ca=$(_system_ca_bundle)
  [ -n "$ca" ] && args+=(--ro-bind "$ca" /etc/ssl/certs/ca-certificates.crt)
  local i
  for ((i = 0; i < ${#vars[@]}; i += 2)); do args+=(--setenv "${vars[i]}" "${vars[i + 1]}"); done
  # Certificate variables may name host paths: point them at the bound bundle inside.
  for var in SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE PIP_CERT; do
    [ -n "${!var:-}" ] && args+=(--setenv "$var" /etc/ssl/certs/ca-certificates.crt)
  done
  [ -n "${SSL_CERT_DIR:-}" ] && args+=(--setenv SSL_CERT_DIR /etc/ssl/certs)
  exec bwrap "${args[@]}" -- "$@"
}

# The locked dependencies in a venv keyed by the lock, the chosen mode and the interpreter.
_ensure_venv() {
  local python key
  if [ "$HFTFX_MODE" = host ]; then python=$(command -v python3); else python=/usr/bin/python3; fi
  # Bytecode is compiled at install: where PYTHONDONTWRITEBYTECODE is set (as on these machines and in many
  # images) Python would otherwise compile TensorFlow's, TFX's and Vertex's sources again in every process,
  # ~20 s per start.
  local -a flags=(--frozen --no-install-project --compile-bytecode)
  key=$( { cat "$HFTFX_ROOT/uv.lock"; echo "$HFTFX_MODE ${HFTFX_ROOTFS:-} $python ${flags[*]}"; } | _hash)
  HFTFX_VENV="$HFTFX_ENV_CACHE/venv-$key"
  [ -f "$HFTFX_VENV/.hftfx-complete" ] && return 0
  _say "installing the locked stack into $HFTFX_VENV"
  rm -rf "$HFTFX_VENV"
  local -a sync=(env "${HFTFX_UV_ENV[@]}" UV_PROJECT_ENVIRONMENT="$HFTFX_VENV" UV_PYTHON="$python"
    "$HFTFX_UV" sync "${flags[@]}" --project "$HFTFX_ROOT")
  local log="$HFTFX_ENV_CACHE/uv-sync.log"
  HFTFX_ENV_DESCRIPTION=setup _run_logged "$log" _exec_in "${sync[@]}" \
    || { _tls_hint "$log"; _die "uv sync failed (see above)"; }
  touch "$HFTFX_VENV/.hftfx-complete"
}

# Makes sure the environment exists (serialised across concurrent callers) and sets HFTFX_* for _exec_in.
hftfx_env_prepare() {
  mkdir -p "$HFTFX_ENV_CACHE/tools"
  HFTFX_MODE=$(hftfx_env_mode)
  exec 9>"$HFTFX_ENV_CACHE/.setup.lock"
  flock 9
  _ensure_uv
  [ "$HFTFX_MODE" = userland ] && _ensure_userland
  _ensure_venv
  flock -u 9
  exec 9>&-
  HFTFX_ENV_DESCRIPTION="$HFTFX_MODE: venv $HFTFX_VENV${HFTFX_ROOTFS:+, Debian 13 userland $HFTFX_ROOTFS}"
}
