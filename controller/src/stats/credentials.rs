//! The credentials the stats client logs in with: the first line of the
//! memcached auth file (`-Y`) the pods mount, and the password as the pod's
//! memcached may have read it.

/// Username and password for memcached's ASCII authentication (`-Y`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
    /// The password as memcached up to 1.6.31 reads it when its line is the
    /// file's last and has no newline: without its last character (fixed
    /// in 1.6.32). A pod that started on such a file admits only this one
    /// until it restarts on a fixed file, and a change in place of that
    /// file waits on reading the pod; tried after `password` is refused.
    pub misread_password: Option<String>,
}

impl Credentials {
    /// The first `user:password` line of a memcached auth file.
    pub fn from_auth_file(content: &str) -> Option<Self> {
        let line = content.lines().map(str::trim).find(|l| !l.is_empty())?;
        let (username, password) = line.split_once(':')?;
        let unterminated = !content.ends_with('\n') && content.trim_end().ends_with(line);
        let misread = unterminated.then(|| {
            let mut misread = password.to_string();
            misread.pop();
            misread
        });
        Some(Credentials {
            username: username.into(),
            password: password.into(),
            misread_password: misread.filter(|p| !p.is_empty()),
        })
    }

    /// The passwords to try, in order.
    pub fn passwords(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.password.as_str()).chain(self.misread_password.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_credentials_line() {
        assert_eq!(
            Credentials::from_auth_file("\nalice:s3cr:et\nbob:x\n"),
            Some(Credentials {
                username: "alice".into(),
                password: "s3cr:et".into(),
                misread_password: None,
            })
        );
        assert_eq!(Credentials::from_auth_file("nocolon"), None);
    }

    #[test]
    fn an_unterminated_last_line_is_also_tried_as_old_memcached_reads_it() {
        let read = |file| Credentials::from_auth_file(file).unwrap();
        assert_eq!(
            read("testuser:testpassword")
                .passwords()
                .collect::<Vec<_>>(),
            ["testpassword", "testpasswor"]
        );
        assert_eq!(read("a:b\nc:d").misread_password, None, "not the last line");
        assert_eq!(read("a:b\n").misread_password, None);
        assert_eq!(read("a:x").misread_password, None, "nothing would be left");
    }
}
