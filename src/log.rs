//! How a failure is written in the log: the error and every source under
//! it, on one line. Imports nothing of the crate, so that any module (the
//! handler, the JWKS fetch) may log with it.

/// An error with its whole source chain on one line, for the log.
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a dyn std::error::Error);

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(err) = source {
            write!(f, ": {err}")?;
            source = err.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_chain_is_each_error_of_the_chain_on_one_line_outermost_first() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("fetching the keys")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let err = Outer(std::io::Error::other("connection refused"));

        assert_eq!(
            ErrorChain(&err).to_string(),
            "fetching the keys: connection refused"
        );
        assert_eq!(ErrorChain(&err.0).to_string(), "connection refused");
    }
}
