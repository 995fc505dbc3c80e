//! Scripted exchanges between the bridge core and a world server.
