//! memcached 1.6.9 to 1.6.39 crash (SIGSEGV) on `stats settings` while they
//! run NAPI ids (`-N`). The real memcached 1.6.18, run with each spelling of
//! `-N` it accepts, read again and again with the stats client as the
//! controller sets it up for a change in place: it stays up and is read.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use memcached_api::apply_defaults;
use memcached_api::render::warm_restart::{ARGS_ANNOTATION, NAPI_IDS_RAN_ANNOTATION};
use memcached_controller::cluster::secrets::SecretData;
use memcached_controller::rollout::pod_change::may_run_napi_ids;
use memcached_controller::stats::client::{StatsClient, settings_crash_with_napi_ids};
use memcached_controller::stats::setup::stats_client;
use memcached_controller::stats::tls::server_name;
use serde_json::{Value, json};
use test_support::on_each_release;
use test_support::real_memcached::{Memcached, start};

/// The client of a warm Memcached (it wants `stats settings`) for `server`,
/// whose pod carries `annotations`, as the reconcile sets it up.
fn controller_client(server: &Memcached, annotations: Value) -> StatsClient {
    let spec =
        apply_defaults(serde_json::from_value(json!({"warmRestart": {"enabled": true}})).unwrap());
    let name = server_name("c", "default").unwrap();
    let mut client = stats_client(&spec, &SecretData::new(), name).unwrap();
    assert!(!client.settings.is_empty(), "a warm Memcached wants them");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "c-abc-12345", "annotations": annotations},
        "spec": {"containers": [{"name": "memcached", "command": ["/bin/sh", "-c", "supervisor"]}]},
    }))
    .unwrap();
    // The pod's record, as a change in place finds it: the server answers
    // on a test port, not memcached's.
    let free = (!may_run_napi_ids(&pod)).then_some(server.addr);
    client.without_napi_ids = Arc::new(free.into_iter().collect());
    client
}

/// Read `server` with `client` five times; it stays the same process.
async fn read_five_times(server: &mut Memcached, client: &StatsClient, args: &[String]) {
    let pid = server.pid();
    let mut read = Vec::new();
    for _ in 0..5 {
        let stats = client.collect(&[server.addr]).await;
        let pod = stats.pods.get(&server.addr);
        assert_eq!(pod.map(|p| p.pid), Some(pid), "{args:?}: {stats:?}");
        read.extend(pod.map(|p| p.pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(server.alive(), Ok(()), "{args:?} crashed");
    }
    println!("{args:?}: pid {pid}, read as {read:?}: alive");
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// The spellings of `-N` memcached 1.6.18 accepts (its help's
/// `--napi_ids` is not one: it exits on that, an unrecognized option).
const SPELLINGS: [&[&str]; 6] = [
    &["-N", "1"],
    &["-N1"],
    &["-vN", "1"],
    &["--napi-ids=1"],
    &["--napi=1"],
    &["--n", "1"],
];

on_each_release! {
    #[tokio::test]
    async fn memcached_running_napi_ids_is_read_and_stays_up_in_every_spelling() {
        for spelling in SPELLINGS {
            let args = strings(spelling);
            let mut server = start(&args);
            // The pod's supervisor reads these args.
            let client = controller_client(&server, json!({ARGS_ANNOTATION: args.join("\n")}));
            read_five_times(&mut server, &client, &args).await;
        }
    }
}

on_each_release! {
    /// `-N` removed from a running pod's args: memcached still runs it until the
    /// supervisor restarts it; the pod's record keeps `stats settings` from it.
    #[tokio::test]
    async fn memcached_whose_pod_no_longer_asks_for_napi_ids_is_not_asked_for_settings() {
        let args = strings(&["-N", "1"]);
        let mut server = start(&args);
        let removed = json!({ARGS_ANNOTATION: "-m\n64", NAPI_IDS_RAN_ANNOTATION: "true"});
        let client = controller_client(&server, removed);
        read_five_times(&mut server, &client, &args).await;
    }
}

on_each_release! {
    /// Without `-N` the settings are read from 1.6.18; by the old decision (the
    /// desired spec without `-N`) the same command crashes a memcached that
    /// still runs it: what the tests above guard against.
    #[tokio::test]
    async fn settings_are_read_without_napi_ids_and_crash_memcached_with_them() {
        let mut plain = start(&strings(&["-t", "2"]));
        let client = controller_client(&plain, json!({ARGS_ANNOTATION: "-t\n2"}));
        let stats = client.collect(&[plain.addr]).await;
        let settings = &stats.pods[&plain.addr].settings;
        assert_eq!(settings.get("num_threads").map(String::as_str), Some("2"));
        assert_eq!(plain.alive(), Ok(()));

        // The old decision (from the desired spec, here without -N) crashes the
        // releases with the bug; later ones answer.
        let mut napi = start(&strings(&["-N", "1"]));
        let wrongly = controller_client(&napi, json!({ARGS_ANNOTATION: "-t\n2"}));
        let version = wrongly
            .collect(&[napi.addr])
            .await
            .version
            .unwrap_or_default();
        if !settings_crash_with_napi_ids(&version) {
            assert_eq!(napi.alive(), Ok(()), "memcached {version}");
            return;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while napi.alive().is_ok() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let exited = napi
            .alive()
            .expect_err("memcached 1.6.9 to 1.6.39 with -N crash on stats settings");
        assert!(!exited.success(), "{exited:?}");
    }
}
