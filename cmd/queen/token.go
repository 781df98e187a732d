package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-serverless/queen/core/auth"
	"github.com/queen-serverless/queen/core/config"
)

// tokenCmd prints an HS256 token signed with $QUEEN_JWT_SECRET, for trying
// the local server's authentication (production tokens come from an
// identity provider).
func tokenCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sub := fs.String("sub", "", "subject: who the caller is (becomes producerSub)")
	roles := fs.String("roles", "", "comma-separated roles: read-only, produce, consume, admin")
	ttl := fs.Duration("ttl", time.Hour, "validity")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	cfg, err := config.FromEnv(getenv)
	if err != nil {
		return err
	}
	if cfg.JWTSecret == "" {
		return errors.New("token: set QUEEN_JWT_SECRET (the same as the server's)")
	}
	if *sub == "" || *roles == "" {
		return errors.New("token: -sub and -roles are required")
	}
	var rs []string
	for _, r := range strings.Split(*roles, ",") {
		r = strings.TrimSpace(r)
		switch auth.Role(r) {
		case auth.ReadOnly, auth.Produce, auth.Consume, auth.Admin:
			rs = append(rs, r)
		default:
			return fmt.Errorf("token: unknown role %q (read-only, produce, consume, admin)", r)
		}
	}
	claims := jwt.MapClaims{"sub": *sub, "roles": rs, "iat": time.Now().Unix(), "exp": time.Now().Add(*ttl).Unix()}
	if cfg.JWTIssuer != "" {
		claims["iss"] = cfg.JWTIssuer
	}
	if cfg.JWTAudience != "" {
		claims["aud"] = cfg.JWTAudience
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(cfg.JWTSecret))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, s)
	return nil
}
