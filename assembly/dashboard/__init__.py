"""`lapilli dashboard`: queues (lab → user), their jobs with the one-line why, and nodes' GPU use, on 127.0.0.1."""
