#!/bin/bash
# A hot standby: on first start, clone the primary with pg_basebackup -R (which writes standby.signal and
# primary_conninfo) through its own replication slot, then run Postgres, which streams from the primary.
set -euo pipefail
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    export PGPASSWORD="$REPLICATION_PASSWORD"
    until pg_isready -h "$PRIMARY_HOST" -U replicator -d postgres; do sleep 1; done
    pg_basebackup -h "$PRIMARY_HOST" -U replicator -D "$PGDATA" -R -X stream -C -S feedfabric_replica
    chmod 700 "$PGDATA"
fi
exec postgres -c hot_standby=on -c hot_standby_feedback=on
