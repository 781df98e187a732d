#!/usr/bin/env bash
# Synthesizes the Queen CloudFormation template offline into infra/cdk.out/.
#
#   infra/synth.sh [extra cdk synth arguments, e.g. -c authorizer=jwt -c jwtIssuer=...]
#
# Installs the pinned CDK CLI on first use (cdk.sh). Uses the Lambda
# binaries from `make build` (build/lambda/<fn>/bootstrap) when all of them exist;
# otherwise, or with QUEEN_PLACEHOLDER_ASSETS=1, synthesizes against placeholder
# assets, which is fine for checking the template but must never be deployed.
set -euo pipefail

cd "$(dirname "$0")"
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="${JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION:-20}"
export CDK_DISABLE_VERSION_CHECK=1 CDK_DISABLE_CLI_TELEMETRY=true

# Every function make build builds; dispatch is deployed only with subscriptionTargets.
functions=(push pop ack dlq admin reaper migrate dispatch)
assets=../build/lambda
missing=0
for fn in "${functions[@]}"; do
	[ -f "$assets/$fn/bootstrap" ] || missing=1
done
if [ "$missing" = 1 ] || [ "${QUEEN_PLACEHOLDER_ASSETS:-0}" = 1 ]; then
	assets=.placeholder-assets
	echo "synth: using placeholder Lambda assets in infra/$assets (run 'make build' before deploying)" >&2
	for fn in "${functions[@]}"; do
		mkdir -p "$assets/$fn"
		printf 'placeholder: run make build\n' >"$assets/$fn/bootstrap"
	done
fi

exec ./cdk.sh synth --quiet --no-notices --no-version-reporting \
	-c assetsDir="$assets" -c migrationNonce=synth "$@"
