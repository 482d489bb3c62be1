// Command coredns is CoreDNS with only the plugins the e2e cluster's DNS
// uses: the kubernetes plugin answering cluster.local from the API server,
// bound to the cluster DNS Service's address, with errors and query logs,
// and hosts answering the mirrored registries' names.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

// In CoreDNS's order (core/dnsserver/zdirectives.go): a plugin sees the
// requests the plugins before it pass on.
func init() {
	dnsserver.Directives = []string{"bind", "errors", "log", "hosts", "kubernetes"}
}

func main() {
	coremain.Run()
}
