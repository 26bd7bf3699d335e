//! `cohort bulk send|recv` as processes over loopback, without an agent, and their refusals.

use std::process::{Command, Stdio};
use std::time::Duration;

fn cohort() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cohort"))
}

#[test]
fn a_file_crosses_whole_and_bad_input_is_refused_with_a_reason() {
    let dir = std::env::temp_dir().join(format!("cohort-bulk-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, dst) = (dir.join("in.bin"), dir.join("out.bin"));
    let data: Vec<u8> = (0..500_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let to = format!("127.0.0.1:{port}");
    let recv = cohort()
        .args(["bulk", "recv", "--listen", &to, "--json", "--out"])
        .arg(&dst)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let send = cohort().args(["bulk", "send", &to]).arg(&src).arg("--json").output().unwrap();
    assert!(send.status.success(), "{}", String::from_utf8_lossy(&send.stderr));
    let sent: serde_json::Value = serde_json::from_slice(&send.stdout).unwrap();
    assert_eq!((sent["bytes"].as_u64(), sent["under_agent"].as_bool()), (Some(500_000), Some(false)));
    let r = recv.wait_with_output().unwrap();
    assert!(r.status.success());
    assert!(std::fs::read(&dst).unwrap() == data);

    let missing = cohort().args(["bulk", "send", &to]).arg(dir.join("nope")).output().unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nope"), "{missing:?}");
    let rate = cohort().args(["bulk", "send", &to]).arg(&src).args(["--rate-mbps", "0"]).output().unwrap();
    assert!(String::from_utf8_lossy(&rate.stderr).contains("--rate-mbps"), "{rate:?}");
    // Nobody listens: a clear error, not a success.
    let gone = cohort().args(["bulk", "send", &to]).arg(&src).output().unwrap();
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("refused"), "{gone:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
