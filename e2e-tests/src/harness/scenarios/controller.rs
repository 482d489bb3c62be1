//! Steps on the controller a suite runs, whichever it is: the suite's own
//! process, or the controller Deployment a scenario installed.

use std::time::Duration;

use crate::harness::{Env, OPERATOR_NAMESPACE, check, wait_for};

/// `meanwhile` run while no controller runs, as during an upgrade or after a
/// lost Lease: the suite's controller process stopped (SIGTERM releases the
/// Lease) and started again under its name, or the controller Deployment
/// (`deploy/controller.yaml`) scaled to 0 until its pods are gone, then back.
pub fn with_controller_stopped(
    env: &mut Env,
    meanwhile: impl FnOnce(&Env) -> Result<(), String>,
) -> Result<(), String> {
    if let Some(operator) = env.operator.take() {
        let name = operator.name.clone();
        operator.stop();
        let outcome = meanwhile(env);
        env.operator = Some(env.start_operator(&name)?);
        return outcome;
    }
    let deployment = "deployment/memcached-operator";
    let live = env.kubectl.get(&[deployment, "-n", OPERATOR_NAMESPACE])?;
    let replicas = live["spec"]["replicas"].as_i64().unwrap_or(1);
    let scale = |to: i64| {
        let to = format!("--replicas={to}");
        let args = ["scale", deployment, "-n", OPERATOR_NAMESPACE, &to];
        env.kubectl.ok(&args).map(drop)
    };
    scale(0)?;
    let gone = wait_for(
        "the controller's pods gone",
        Duration::from_secs(60),
        || {
            let pods = env.kubectl.get(&["pods", "-n", OPERATOR_NAMESPACE])?;
            let left = pods["items"].as_array().map_or(0, Vec::len);
            check(left == 0, format!("{left} pods left"))
        },
    );
    let outcome = gone.and_then(|()| meanwhile(env));
    scale(replicas)?;
    outcome
}
