#!/bin/bash
# fetch-rocm.sh DEST - the pinned ROCm HIP header, runtime and device
# bitcode packages of Debian (7.2.4 from experimental, 6.4.3 from sid),
# fetched with a private apt source list and unpacked (dpkg-deb -x) into
# DEST/rocm-7.2.4 and DEST/rocm-6.4.3, without touching the system.  Each
# .deb is checked against its SHA-256; old versions leave the archive, so
# a failure here says which one went missing.
set -euo pipefail
dest=$(mkdir -p "$1" && cd "$1" && pwd)
uri=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
uri=${uri:-http://deb.debian.org/debian}
apt_dir=$dest/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$dest/debs"
cat >"$apt_dir/sources.list" <<EOT
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri experimental main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri sid main
EOT
opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=-
      -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
      -o APT::Sandbox::User=root)
apt-get "${opts[@]}" update -qq
# package=version sha256 tree
pins=(
  "libamdhip64-dev=7.2.4-1~exp2 28ae316c5be2d33b53fae8f2151e76a758f84aa3493abafeaef935e49cc5ba07 rocm-7.2.4"
  "libamdhip64-7=7.2.4-1~exp2 265743c8647c0200b014062d3fdcea617c1b7c87a214f666a86dc1da8dd53192 rocm-7.2.4"
  "rocm-device-libs-22=7.2.4+dfsg-1~exp1 24b439be7c151ff67bc1f4f4f42a7c4047b3e6fd7905b9e6df89c0fa5dea8031 rocm-7.2.4"
  "libamdhip64-dev=6.4.3-5 f2a3a542d41883f87a45e2d0554c1c84ccf350c836b9e8b35473dadbc34ced5e rocm-6.4.3"
  "libamdhip64-6=6.4.3-5 0c90c3f0a1f02ab5525a11c5b1879f1cb05bee9c7a2a79aa36863f57c85f7177 rocm-6.4.3"
)
cd "$dest/debs"
for pin in "${pins[@]}"; do
  read -r pkg sum tree <<<"$pin"
  rm -f ./*.deb
  apt-get "${opts[@]}" download -qq "$pkg" || { echo "fetch-rocm: $pkg is no longer in $uri"; exit 1; }
  deb=$(ls ./*.deb)
  echo "$sum  $deb" | sha256sum -c --quiet || { echo "fetch-rocm: $deb: SHA-256 differs"; exit 1; }
  mkdir -p "$dest/$tree"
  dpkg-deb -x "$deb" "$dest/$tree"
done
rm -f ./*.deb
echo "fetch-rocm: $dest/rocm-7.2.4 and $dest/rocm-6.4.3"
