#!/usr/bin/env bash
# browser.sh: the tools of the browser test (test/web), installed when missing.
#
# Usage: browser.sh [chromium]   prints the path of a Chromium to drive
#        browser.sh promtool     prints the path of Prometheus's promtool
#        browser.sh env          prints TURBO_TEST_CHROMIUM=... and
#                                TURBO_TEST_PROMTOOL=... lines, for
#                                `set -a; . FILE; set +a`
#
# Chromium: TURBO_TEST_CHROMIUM when it names an executable, else the first of
# chromium, chromium-browser, google-chrome, google-chrome-stable on PATH,
# else Debian's `chromium` package (without its recommends, with
# fonts-liberation for legible text), installed with apt-get (as root or through
# password-less sudo; `apt-get update` first only when apt knows no candidate,
# or the install failed on stale lists).
#
# promtool: TURBO_TEST_PROMTOOL or promtool on PATH, else the promtool binary
# alone, taken out of Debian's `prometheus` package: `apt-get download` (no
# root needed) and extracted into TURBO_TOOLS_CACHE (default
# $XDG_CACHE_HOME/turbo/tools). Installing the package would also install and,
# where an init system runs, start a Prometheus server, which the tests do not
# want; promtool is a static binary that needs nothing else from it.
#
# podman: TURBO_TEST_PODMAN or podman on PATH, else Debian's podman and runc
# packages, installed with apt-get like Chromium; for the container test
# (test/container). `env` adds TURBO_TEST_PODMAN=... and, when runc is there,
# TURBO_TEST_OCI_RUNTIME=... (crun, podman's default here, refuses hosts whose
# cgroups are in hybrid mode, as some CI machines' are); a missing podman
# only leaves its line out (the container test then fails and says why).
#
# Messages go to stderr; stdout carries only the paths (or the env lines).
# Exit codes: 0 ok, 1 failure, 2 usage, 3 the tool is missing and cannot be
# installed (as test/kafka/kafka.sh does for Java). `env` exits 3 when
# Chromium is missing; a missing promtool only leaves its line out (the tests
# then lint with client_golang's promlint instead).
set -euo pipefail

readonly CACHE_DIR="${TURBO_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/turbo/tools}"
# Seconds apt-get waits for another apt-get's lock before failing.
readonly APT_LOCK_TIMEOUT=600

log() { printf 'browser: %s\n' "$*" >&2; }

# sudo_cmd prints nothing when root, "sudo -n" with password-less sudo, and
# fails otherwise.
sudo_cmd() {
	if [[ $(id -u) -eq 0 ]]; then
		return 0
	fi
	if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		printf 'sudo -n'
		return 0
	fi
	return 1
}

# apt_candidate prints the version apt would install of package $1, or
# nothing when apt knows none.
apt_candidate() {
	apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)' || true
}

apt_update() {
	local sudo=$1
	log "apt-get update"
	# shellcheck disable=SC2086 # $sudo is empty or "sudo -n"
	$sudo apt-get -o DPkg::Lock::Timeout=$APT_LOCK_TIMEOUT update -q >&2
}

# find_chromium prints the first Chromium found, or fails.
find_chromium() {
	if [[ -n ${TURBO_TEST_CHROMIUM:-} && -x ${TURBO_TEST_CHROMIUM} ]]; then
		printf '%s' "$TURBO_TEST_CHROMIUM"
		return 0
	fi
	local name
	for name in chromium chromium-browser google-chrome google-chrome-stable; do
		if command -v "$name" >/dev/null; then
			command -v "$name"
			return 0
		fi
	done
	return 1
}

# apt_install installs packages $2... with apt-get, named $1 in messages;
# without their recommends unless APT_RECOMMENDS=yes.
apt_install() {
	local what=$1 sudo
	shift
	if ! sudo=$(sudo_cmd); then
		log "not root and no password-less sudo: cannot install $what"
		return 1
	fi
	if ! command -v apt-get >/dev/null; then
		log "no apt-get: cannot install $what"
		return 1
	fi
	if [[ -z $(apt_candidate "$1") ]]; then
		apt_update "$sudo" || return 1
	fi
	local started=$SECONDS
	log "installing $what $(apt_candidate "$1") with apt-get"
	# shellcheck disable=SC2086
	if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=$APT_LOCK_TIMEOUT \
		install -y -q "$(recommends)" "$@" >&2; then
		# Lists older than the mirror's files end in 404s: refresh, once.
		apt_update "$sudo" || return 1
		# shellcheck disable=SC2086
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=$APT_LOCK_TIMEOUT \
			install -y -q "$(recommends)" "$@" >&2 || return 1
	fi
	log "$what installed in $((SECONDS - started)) s"
}

recommends() {
	if [[ ${APT_RECOMMENDS:-} == yes ]]; then
		printf -- '--install-recommends'
	else
		printf -- '--no-install-recommends'
	fi
}

install_chromium() { apt_install chromium chromium fonts-liberation; }

# need_podman prints the path of podman (and installs it with runc when
# missing), or fails with 3.
need_podman() {
	if [[ -n ${TURBO_TEST_PODMAN:-} && -x ${TURBO_TEST_PODMAN} ]]; then
		printf '%s\n' "$TURBO_TEST_PODMAN"
		return 0
	fi
	if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
		# With its recommends (storage and network helpers), as tested.
		if ! APT_RECOMMENDS=yes apt_install podman podman runc; then
			log "podman cannot be installed; the container test cannot run"
			return 3
		fi
	fi
	command -v podman
}

need_chromium() {
	local path
	if path=$(find_chromium); then
		printf '%s\n' "$path"
		return 0
	fi
	log "no Chromium on PATH (chromium, chromium-browser, google-chrome) and TURBO_TEST_CHROMIUM unset"
	if ! install_chromium; then
		log "Chromium cannot be installed; the browser test cannot run"
		return 3
	fi
	if ! path=$(find_chromium); then
		log "still no chromium on PATH after apt-get"
		return 3
	fi
	printf '%s\n' "$path"
}

# find_promtool prints the first promtool found (the cache's included), or
# fails.
find_promtool() {
	if [[ -n ${TURBO_TEST_PROMTOOL:-} && -x ${TURBO_TEST_PROMTOOL} ]]; then
		printf '%s' "$TURBO_TEST_PROMTOOL"
		return 0
	fi
	if command -v promtool >/dev/null; then
		command -v promtool
		return 0
	fi
	local cached
	for cached in "$CACHE_DIR"/prometheus-*/promtool; do
		if [[ -x $cached ]]; then
			printf '%s' "$cached"
			return 0
		fi
	done
	return 1
}

# fetch_promtool extracts usr/bin/promtool of the `prometheus` package into
# CACHE_DIR/prometheus-VERSION/.
fetch_promtool() {
	if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
		log "no apt-get or dpkg-deb: cannot fetch promtool"
		return 1
	fi
	local version sudo
	version=$(apt_candidate prometheus)
	if [[ -z $version ]]; then
		if ! sudo=$(sudo_cmd); then
			log "apt knows no prometheus package and cannot update its lists (not root)"
			return 1
		fi
		apt_update "$sudo" || return 1
		version=$(apt_candidate prometheus)
		[[ -n $version ]] || {
			log "apt knows no prometheus package"
			return 1
		}
	fi
	local work dest
	work=$(mktemp -d)
	# shellcheck disable=SC2064 # expand now: work is local
	trap "rm -rf '$work'" RETURN
	dest="$CACHE_DIR/prometheus-${version//[^A-Za-z0-9.+~-]/_}"
	log "fetching promtool from Debian's prometheus $version (apt-get download; the package is not installed)"
	(cd "$work" && apt-get download -q "prometheus=$version" >&2) || return 1
	local deb
	deb=$(find "$work" -maxdepth 1 -name 'prometheus_*.deb' -print -quit)
	[[ -n $deb ]] || {
		log "apt-get download left no prometheus_*.deb"
		return 1
	}
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" ./usr/bin/promtool || {
		log "the prometheus package ships no usr/bin/promtool"
		return 1
	}
	mkdir -p "$dest"
	install -m 0755 "$work/usr/bin/promtool" "$dest/promtool.tmp"
	mv "$dest/promtool.tmp" "$dest/promtool"
	log "promtool in $dest"
}

need_promtool() {
	local path
	if path=$(find_promtool); then
		printf '%s\n' "$path"
		return 0
	fi
	if ! fetch_promtool; then
		log "promtool cannot be fetched"
		return 3
	fi
	find_promtool && printf '\n'
}

case ${1:-chromium} in
chromium)
	need_chromium
	;;
promtool)
	need_promtool
	;;
podman)
	need_podman
	;;
env)
	rc=0
	if chromium=$(need_chromium); then
		printf 'TURBO_TEST_CHROMIUM=%q\n' "$chromium"
	else
		rc=$?
	fi
	if promtool=$(need_promtool); then
		printf 'TURBO_TEST_PROMTOOL=%q\n' "$promtool"
	else
		prc=$?
		[[ $prc -eq 3 ]] || rc=$prc
	fi
	if podman=$(need_podman); then
		printf 'TURBO_TEST_PODMAN=%q\n' "$podman"
		if runc=$(command -v runc); then
			printf 'TURBO_TEST_OCI_RUNTIME=%q\n' "$runc"
		fi
	fi
	exit $rc
	;;
*)
	printf 'usage: %s [chromium|promtool|podman|env]\n' "$0" >&2
	exit 2
	;;
esac
