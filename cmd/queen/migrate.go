package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/queen-serverless/queen/core/pgstore"
)

func migrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	url := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres URL (default $DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		return errors.New("migrate: set DATABASE_URL or -database-url")
	}
	res, err := pgstore.MigrateURLWith(ctx, *url, pgstore.MigrateOptions{OnRetry: func(step string, attempt int, err error) {
		fmt.Fprintf(os.Stderr, "%s: timed out waiting for a lock (attempt %d: %v); trying again\n", step, attempt, err)
	}})
	if err != nil {
		return err
	}
	if len(res.Ahead) > 0 {
		fmt.Printf("the database was migrated by a newer release (it has %s): nothing applied, routines left as they are\n",
			strings.Join(res.Ahead, ", "))
		return nil
	}
	if len(res.Applied) == 0 && !res.RoutinesReplaced {
		fmt.Println("schema is up to date")
		return nil
	}
	for _, v := range res.Applied {
		fmt.Println("applied", v)
	}
	if res.RoutinesReplaced {
		fmt.Println("routines replaced")
	}
	return nil
}
