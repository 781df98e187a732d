#!/usr/bin/env bash
# Runs the pinned AWS CDK CLI from infra/, installing it into infra/_tools/ on first use.
#
#   infra/cdk.sh deploy [-c key=value ...]     # after `make build`
#   infra/cdk.sh diff | destroy | ...
#
# `deploy` refuses to upload anything but real Lambda binaries from build/lambda/.
set -euo pipefail

cd "$(dirname "$0")"
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="${JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION:-20}"
export CDK_DISABLE_VERSION_CHECK=1

if [ ! -x _tools/node_modules/.bin/cdk ]; then
	echo "cdk.sh: installing the AWS CDK CLI into infra/_tools" >&2
	(cd _tools && npm ci --no-audit --no-fund --loglevel=error)
fi

if [ "${1:-}" = deploy ]; then
	for arg in "$@"; do
		case "$arg" in assetsDir=*) echo "cdk.sh: deploy uses ../build/lambda; drop $arg" >&2; exit 2 ;; esac
	done
	# dispatch too: make build builds it, and a stack with subscriptionTargets deploys it.
	for fn in push pop ack dlq admin reaper migrate dispatch; do
		bin=../build/lambda/$fn/bootstrap
		if [ ! -f "$bin" ] || [ "$(head -c 4 "$bin" | od -An -c | tr -d ' ')" != '177ELF' ]; then
			echo "cdk.sh: $bin is missing or not a Linux binary: run 'make build' first" >&2
			exit 1
		fi
	done
fi

exec _tools/node_modules/.bin/cdk "$@"
