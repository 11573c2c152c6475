"""A stand-in for gym's CartPole (no gym here): the classic cart-pole physics, in either gym API.

``gym.make("CartPole-v0" | "CartPole-v1")`` gives an environment with gym's dynamics, episode
limits (200 / 500 steps) and ``spec.reward_threshold`` (195 / 475). ``PORTED_GYM_API`` picks the
API the program was written for: ``new`` (gym >= 0.26: ``reset(seed=)`` returns ``(obs, info)``,
``step`` returns 5 values) or ``old`` (``seed()``, ``reset()`` returns ``obs``, ``step`` returns 4).
The example programs loop over episodes until the task is solved; ``PORTED_GYM_EPISODES`` (when
set) ends the program with exit status 0 at the start of the episode after that many, which is
the only way to make their run short without editing them.
"""

from __future__ import annotations

import math
import os
import sys
from types import SimpleNamespace

import numpy as np

__all__ = ["make"]


class CartPoleEnv:
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold, x_threshold = 12 * 2 * math.pi / 360, 2.4

    def __init__(self, max_steps: int, threshold: float):
        self.spec = SimpleNamespace(reward_threshold=threshold, max_episode_steps=max_steps)
        self.max_steps = max_steps
        self.new_api = os.environ.get("PORTED_GYM_API", "new") == "new"
        self.episode_limit = int(os.environ.get("PORTED_GYM_EPISODES", "0"))
        self.episodes = 0
        self.rng = np.random.default_rng()
        self.state = np.zeros(4)
        self.steps = 0

    def seed(self, seed=None):
        self.rng = np.random.default_rng(seed)
        return [seed]

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.seed(seed)
        if seed is None:  # reset(seed=...) seeds before the first episode in the new API's programs
            self.episodes += 1
        if self.episode_limit and self.episodes > self.episode_limit:
            print(f"[gym shim] stopping after {self.episode_limit} episodes")
            sys.stdout.flush()
            sys.exit(0)
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        self.steps = 0
        obs = self.state.astype(np.float32)
        return (obs, {}) if self.new_api else obs

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if int(action) == 1 else -self.force_mag
        cos, sin = math.cos(theta), math.sin(theta)
        total = self.masscart + self.masspole
        temp = (force + self.masspole * self.length * theta_dot ** 2 * sin) / total
        theta_acc = (self.gravity * sin - cos * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * cos ** 2 / total))
        x_acc = temp - self.masspole * self.length * theta_acc * cos / total
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * x_acc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.steps += 1
        terminated = bool(abs(x) > self.x_threshold or abs(theta) > self.theta_threshold)
        truncated = self.steps >= self.max_steps
        obs = self.state.astype(np.float32)
        if self.new_api:
            return obs, 1.0, terminated, truncated, {}
        return obs, 1.0, terminated or truncated, {}

    def render(self):
        pass


def make(name: str, **kwargs) -> CartPoleEnv:
    limits = {"CartPole-v0": (200, 195.0), "CartPole-v1": (500, 475.0)}
    if name not in limits:
        raise ValueError(f"the gym shim has only {sorted(limits)}, not {name!r}")
    return CartPoleEnv(*limits[name])
