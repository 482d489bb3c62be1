//! `make demo`, second half: the whole product on a local control plane.
//! Every seed example goes through `kubectl apply` and the policy webhook;
//! the accepted ones are reconciled by the controller into real objects with
//! a real memcached behind every pod. Set `DEMO_KEEP=1` to keep the cluster
//! running afterwards (Ctrl-C stops it).

use std::time::Duration;

use e2e_tests::cluster::{Env, wait_for};
use e2e_tests::fixtures;
use serde_json::json;

const NAMESPACE: &str = "demo";

fn main() {
    if let Err(e) = demo() {
        eprintln!("demo failed: {e}");
        std::process::exit(1);
    }
}

fn demo() -> Result<(), String> {
    let workdir = std::env::temp_dir().join("memcached-demo");
    println!(
        "== starting a local control plane (etcd, kube-apiserver, controllers, scheduler, 3 kwok nodes)"
    );
    let env = Env::start(&workdir)?;
    println!(
        "   ready in {:.1}s; kubeconfig {}",
        env.cluster.start_time.as_secs_f64(),
        env.cluster.kubeconfig.display()
    );
    let kubectl = &env.kubectl;
    kubectl.apply(
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            .to_string(),
    )?;

    println!("\n== kubectl apply of every seed example (v1beta1), through the policy webhook");
    for fixture in fixtures() {
        let object = &fixture.review["request"]["object"];
        if !(fixture.name.starts_with("design-") || fixture.name.starts_with("seed-"))
            || !fixture.name.ends_with("-v1beta1")
        {
            continue;
        }
        let mut object = object.clone();
        object["metadata"]["namespace"] = json!(NAMESPACE);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let outcome = kubectl.run(&["apply", "-f", "-"], Some(&object.to_string()));
        println!("\n-- {}", fixture.name);
        print!("{}{}", outcome.stdout, outcome.stderr);
        // The seed examples share one name: keep the design doc's, delete the rest.
        if outcome.success && fixture.name.starts_with("seed-") {
            let deleted = kubectl.run(&["delete", "memcached", &name, "-n", NAMESPACE], None);
            print!("{}{}", deleted.stdout, deleted.stderr);
        }
    }

    println!("\n== defaults the policy filled in for basic-cache");
    print!(
        "{}",
        kubectl.ok(&[
            "get",
            "memcached",
            "basic-cache",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.spec}"
        ])?
    );
    println!();

    println!("\n== waiting for the controller (examples whose Secrets do not exist stay Degraded)");
    let _ = wait_for("the examples to settle", Duration::from_secs(60), || {
        let list = kubectl.get(&["memcached", "-n", NAMESPACE])?;
        let settled = list["items"].as_array().into_iter().flatten().all(|mc| {
            mc["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| {
                    (c["type"] == "Ready" && c["status"] == "True")
                        || (c["type"] == "Degraded" && c["reason"] == "SecretNotFound")
                })
        });
        if settled {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
    println!("\n$ kubectl get memcached -n {NAMESPACE}");
    print!("{}", kubectl.ok(&["get", "memcached", "-n", NAMESPACE])?);
    println!(
        "\n$ kubectl get deployments,services,poddisruptionbudgets,horizontalpodautoscalers,networkpolicies,pods -n {NAMESPACE}"
    );
    print!("{}", kubectl.ok(&["get", "deployments,services,poddisruptionbudgets,horizontalpodautoscalers,networkpolicies,pods", "-n", NAMESPACE])?);
    println!(
        "\n$ kubectl get memcached basic-cache -n {NAMESPACE} -o jsonpath='{{.status}}'   (live from memcached stats)"
    );
    print!(
        "{}",
        kubectl.ok(&[
            "get",
            "memcached",
            "basic-cache",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.status}"
        ])?
    );
    println!();

    if std::env::var_os("DEMO_KEEP").is_some() {
        println!(
            "\ncluster kept running: KUBECONFIG={} {} get memcached -A   (Ctrl-C stops it)",
            env.cluster.kubeconfig.display(),
            env.binaries.kubectl.display()
        );
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    Ok(())
}
