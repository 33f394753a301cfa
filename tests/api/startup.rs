//! The built function refuses to start without a way to verify tokens.

use crate::helpers::built_function;

/// Runs the built function with only `vars` in its environment, until it
/// exits: its exit code, and its stdout and stderr together.
pub(crate) fn start_the_function(vars: &[(&str, &str)]) -> (Option<i32>, String) {
    let output = built_function()
        .env_clear()
        .envs(vars.iter().copied())
        .output()
        .expect("the function binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

#[test]
fn without_a_token_verifier_the_function_exits_with_one_line_naming_the_variables() {
    let (code, output) = start_the_function(&[("TABLE_NAME", "plants")]);

    assert_eq!(code, Some(1), "{output}");
    assert_eq!(output.lines().count(), 1, "{output}");
    assert!(output.contains("set PLANTS_TOKEN_SHA256"), "{output}");
    assert!(output.contains("PLANTS_JWT_ISSUER"), "{output}");
}

#[test]
fn without_a_table_name_the_function_exits_naming_table_name() {
    let (code, output) = start_the_function(&[(
        "PLANTS_TOKEN_SHA256",
        "6f07e6f450d73a3176f329c6900a41f88a96f4b875cbea4e6f9e25f8ad1362f5",
    )]);

    assert_eq!(code, Some(1), "{output}");
    assert!(output.contains("TABLE_NAME is not set"), "{output}");
}
