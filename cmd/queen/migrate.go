package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

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
	res, err := pgstore.MigrateURL(ctx, *url)
	if err != nil {
		return err
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
