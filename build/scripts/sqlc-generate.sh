#!/usr/bin/env bash
# Regenerates storage/db from storage/migrations and storage/queries with
# sqlc (installed into $(go env GOPATH)/bin if missing; needs cgo and a C
# compiler, takes a minute or two the first time).
#   build/scripts/sqlc-generate.sh          regenerate
#   build/scripts/sqlc-generate.sh --check  fail if the committed code is stale
# It also records the SHA-256 of every input in storage/db/inputs.sha256;
# a Go test (storage/generated_test.go) fails when an input changed without
# regenerating, so CI needs no sqlc.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=v1.31.1
bin="$(go env GOPATH)/bin/sqlc"
if ! [ -x "$bin" ] || ! "$bin" version 2>/dev/null | grep -q "${version}"; then
	echo "installing sqlc ${version} into $(dirname "$bin")" >&2
	CGO_ENABLED=1 GOBIN="$(dirname "$bin")" go install "github.com/sqlc-dev/sqlc/cmd/sqlc@${version}"
fi
if [ "${1:-}" = "--check" ]; then
	"$bin" diff
	echo "storage/db is up to date"
else
	"$bin" generate
	sha256sum sqlc.yaml storage/migrations/*.sql storage/queries/*.sql storage/sqlcschema/*.sql >storage/db/inputs.sha256
fi
