# Pinned Debian packages as .debs in .cache/docker/debs, fetched with `apt-get download` on the
# machine's network and kept (a warm run fetches nothing). Shared by the stand-in images
# (scripts/docker-images.sh) and the feed's allocator for tests and benches
# (scripts/jemalloc-setup.sh). Source it with $root set to the repository.
debs_dir="$root/.cache/docker/debs"

# apt-get download, once per pinned version ("name=version" arguments). Returns non-zero when the
# download fails, its output in $debs_dir/download.log.
fetch_debs() {
  mkdir -p "$debs_dir"
  local missing=()
  for spec in "$@"; do
    local name="${spec%%=*}" version="${spec#*=}"
    compgen -G "$debs_dir/${name}_${version//:/%3a}_*.deb" >/dev/null || missing+=("$spec")
  done
  [[ ${#missing[@]} -eq 0 ]] && return
  # A machine whose package lists are missing or stale gets one `apt-get update`, then a retry.
  (cd "$debs_dir" && { apt-get download -q "${missing[@]}" || { apt-get update -qq && apt-get download -q "${missing[@]}"; }; } \
    >"$debs_dir/download.log" 2>&1)
}

# The downloaded .deb of "name=version".
deb_path() { local name="${1%%=*}" version="${1#*=}"; ls "$debs_dir/${name}_${version//:/%3a}_"*.deb; }

# The feed's allocator as "libjemalloc2=<version>": the pin in feed/image/Dockerfile (its
# `ARG JEMALLOC_PACKAGE=` line) is the one place the version is written, so the image, its
# stand-in base and the tests that run the feed as the image does use the same one.
jemalloc_package() {
  local found
  found="$(sed -n 's/^ARG JEMALLOC_PACKAGE=//p' "$root/feed/image/Dockerfile")"
  [[ "$found" =~ ^libjemalloc2=[0-9][A-Za-z0-9.+:~-]*$ ]] || { echo "feed/image/Dockerfile: no single 'ARG JEMALLOC_PACKAGE=libjemalloc2=<version>' line" >&2; return 1; }
  echo "$found"
}
