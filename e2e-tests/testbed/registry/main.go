// CNCF Distribution's registry, for the end-to-end tests: the e2e pushes the
// annotated policy here with `kwctl push` and policy-server pulls it back.
// The same program as upstream's cmd/registry, with only the filesystem storage
// driver linked in (no cloud drivers, no auth plugins). Test-only.
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	// `registry serve <config.yml>`; Execute prints its own errors.
	if err := registry.RootCmd.Execute(); err != nil {
		panic(err)
	}
}
