#!/usr/bin/env bash
# Generates the Go code for proto/*.proto into proto/<pkg>/, or with --check,
# fails when the committed code differs from what would be generated.
#
# protoc comes from Maven Central (com.google.protobuf:protoc);
# protoc-gen-go and protoc-gen-go-grpc are built from the versions in go.mod
# (protoc-gen-go-grpc is a tool there); all are cached outside the
# repository.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_VERSION=4.28.3
cache="${TURBO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/turbo}"
protoc="$cache/protoc/$PROTOC_VERSION/protoc"

if [[ ! -x "$protoc" ]]; then
  case "$(uname -m)" in
    x86_64) arch=x86_64 ;;
    aarch64) arch=aarch_64 ;;
    *) echo "proto/gen.sh: no protoc build for $(uname -m)" >&2; exit 1 ;;
  esac
  command -v mvn >/dev/null || { echo "proto/gen.sh: Maven (mvn) is needed to fetch protoc" >&2; exit 1; }
  mkdir -p "$(dirname "$protoc")"
  mvn -q dependency:copy \
    -Dartifact="com.google.protobuf:protoc:$PROTOC_VERSION:exe:linux-$arch" \
    -DoutputDirectory="$(dirname "$protoc")" -Dmdep.stripVersion=true >&2
  mv "$(dirname "$protoc")/protoc-linux-$arch.exe" "$protoc"
  chmod +x "$protoc"
fi

plugins="$cache/protoc/go-plugins"
mkdir -p "$plugins"
GOBIN="$plugins" go install google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

out=proto
if [[ "${1:-}" == "--check" ]]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
PATH="$plugins:$PATH" "$protoc" -I proto --go_out="$out" --go_opt=module=github.com/turbokafka/turbo/proto \
  --go-grpc_out="$out" --go-grpc_opt=module=github.com/turbokafka/turbo/proto proto/*.proto

if [[ "${1:-}" == "--check" ]]; then
  for f in $(cd "$out" && find . -name '*.pb.go'); do
    if ! diff -u "proto/$f" "$out/$f" >&2; then
      echo "proto/gen.sh: proto/$f is stale: run make proto and commit the result" >&2
      exit 1
    fi
  done
  echo "generated protobuf code is current"
fi
