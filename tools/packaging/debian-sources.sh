#!/usr/bin/env bash
# tools/packaging/debian-sources.sh DEST - puts the Debian sources of civetweb and cJSON, patched
# as Debian builds them, into DEST/civetweb and DEST/cjson, for the self-contained libclrscope.so
# (tools/packaging/CMakeLists.txt compiles them into it). The versions are those of the installed
# libcivetweb-dev and libcjson-dev, whose headers the rest of clrscope is compiled against.
#
# apt-get source needs deb-src entries, which a Debian machine often lacks: the machine's own
# Debian entries (/etc/apt/sources.list, /etc/apt/sources.list.d/debian.sources) are turned into
# deb-src ones in a private apt state under DEST/apt, so the machine's apt setup is left as it
# is and no root is needed. apt checks what it downloads against the signed index; dpkg-source
# (dpkg-dev) unpacks and applies Debian's patches. Nothing is fetched again when DEST already
# holds these versions.
set -euo pipefail
dest=${1:?usage: debian-sources.sh DEST}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

want=()
for pkg in libcivetweb-dev libcjson-dev; do
  # the build machine's own architecture (with multiarch, another one may be installed too)
  v=$(dpkg-query -W -f='${source:Package}=${source:Version}' "$pkg:$(dpkg --print-architecture)" \
      2>/dev/null) || {
    echo "debian-sources: $pkg is not installed (tools/deps.sh build installs it)" >&2
    exit 1
  }
  want+=("$v")
done
stamp="${want[*]}"
if [ "$(cat "$dest/.versions" 2>/dev/null)" = "$stamp" ] &&
   [ -f "$dest/civetweb/src/civetweb.c" ] && [ -f "$dest/cjson/cJSON.c" ]; then
  exit 0
fi
for tool in apt-get dpkg-source; do
  command -v "$tool" >/dev/null || {
    echo "debian-sources: $tool is missing (apt-get install dpkg-dev)" >&2
    exit 1
  }
done

apt="$dest/apt"
rm -rf "$apt"
mkdir -p "$apt/parts" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/download"
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  sed -E 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
    >"$apt/parts/debian-src.sources"
fi
if [ -f /etc/apt/sources.list ]; then
  sed -nE 's/^[[:space:]]*deb[[:space:]]+/deb-src /p' /etc/apt/sources.list >"$apt/parts/debian-src.list"
fi
if ! grep -qsE '^(Types: deb-src|deb-src )' "$apt/parts"/*; then
  echo "debian-sources: no Debian entry in /etc/apt/sources.list or" \
       "/etc/apt/sources.list.d/debian.sources to take the sources from" >&2
  exit 1
fi
opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt/parts"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "Debug::NoLocking=1")
# as root apt drops to its _apt user to download, which cannot write into a private directory
[ "$(id -u)" -ne 0 ] || opts+=(-o "APT::Sandbox::User=root")
echo "debian-sources: fetching ${want[*]} into $dest"
apt-get "${opts[@]}" -qq update
(cd "$apt/download" && apt-get "${opts[@]}" -qq source --download-only "${want[@]}")
for v in "${want[@]}"; do
  name=${v%%=*}
  dsc=$(ls "$apt/download/${name}_"*.dsc)
  rm -rf "${dest:?}/$name"
  dpkg-source --no-check -x "$dsc" "$dest/$name" >/dev/null
done
rm -rf "$apt/lists" "$apt/cache" "$dest"/*.orig.tar.*
echo "$stamp" >"$dest/.versions"
