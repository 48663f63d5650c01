//! The session store (filled in by the session-store work).
