// Package db holds the queries that sqlc generates from storage/queries/*.sql
// against the schema in storage/migrations (do not edit the *.sql.go files:
// run build/scripts/sqlc-generate.sh). Use it through storage.DB.Queries()
// for what the storage domain API lacks.
package db
