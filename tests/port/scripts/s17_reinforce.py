"""REINFORCE and actor-critic on a small NumPy grid world, in the layout of the classic
examples: a ``Policy`` with ``saved_log_probs``/``rewards`` lists, ``Categorical(probs)``
``sample()`` + ``log_prob``, ``eps = np.finfo(np.float32).eps.item()``, discounted returns
built backwards with ``insert(0, R)``, ``(returns - returns.mean()) / (returns.std() + eps)``,
``torch.cat(policy_loss).sum()``, ``del policy.rewards[:]``, an actor-critic variant with
``F.smooth_l1_loss`` and ``entropy()``, a Gaussian policy with ``Normal`` (``rsample``,
``log_prob(...).sum(-1)``), and a running reward.  With ``--actions numpy`` the actions are
drawn from NumPy with the policy's probabilities, so both libraries see the same episodes.

    python s17_reinforce.py --episodes 8 --actions numpy --out reinforce.json
"""

import argparse
import json
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical, Normal

SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class GridWorld:
    """Walk on a line of 6 cells; +1 at the right end, -0.05 per step."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.pos = int(self.rng.integers(0, 3))
        return self._obs()

    def _obs(self):
        o = np.zeros(6, dtype=np.float32)
        o[self.pos] = 1.0
        return o

    def step(self, action):
        self.pos = min(max(self.pos + (1 if action == 1 else -1), 0), 5)
        done = self.pos == 5
        return self._obs(), (1.0 if done else -0.05), done


class Policy(nn.Module):
    def __init__(self, critic=False):
        super().__init__()
        self.affine1 = nn.Linear(6, 16)
        self.dropout = nn.Dropout(p=0.0)
        self.affine2 = nn.Linear(16, 2)
        self.value_head = nn.Linear(16, 1) if critic else None
        self.saved_log_probs = []
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        probs = F.softmax(action_scores, dim=1)
        if self.value_head is not None:
            return probs, self.value_head(x)
        return probs


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.mu = nn.Linear(6, 2)
        self.log_std = nn.Parameter(torch.zeros(2) - 0.5)

    def forward(self, x):
        return Normal(self.mu(x), self.log_std.exp())


def main():
    parser = argparse.ArgumentParser(description="PyTorch REINFORCE example")
    parser.add_argument("--gamma", type=float, default=0.99, metavar="G")
    parser.add_argument("--seed", type=int, default=543, metavar="N")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--log-interval", type=int, default=2, metavar="N")
    parser.add_argument("--actions", choices=["torch", "numpy"], default="torch")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    eps = np.finfo(np.float32).eps.item()
    act_rng = np.random.default_rng(args.seed)
    init = np.random.default_rng(1)

    def load_init(model):
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.from_numpy(init.uniform(-0.4, 0.4, tuple(p.shape)).astype(np.float32)))
        return model

    def draw(m):
        if args.actions == "torch":
            return m.sample()
        p = m.probs.detach().numpy().astype(np.float64)[0]
        return torch.tensor([int(act_rng.choice(len(p), p=p / p.sum()))])

    results = {}
    for variant in ("reinforce", "actor_critic"):
        env = GridWorld(args.seed)
        policy = load_init(Policy(critic=variant == "actor_critic"))
        optimizer = optim.Adam(policy.parameters(), lr=1e-2)
        running_reward = 0
        history = []
        for i_episode in range(1, args.episodes + 1):
            state, ep_reward = env.reset(), 0
            for t in range(1, 30):  # noqa: B007  (t is the episode length)
                state_t = torch.from_numpy(state).float().unsqueeze(0)
                if variant == "reinforce":
                    probs = policy(state_t)
                    m = Categorical(probs)
                    action = draw(m)
                    policy.saved_log_probs.append(m.log_prob(action))
                else:
                    probs, state_value = policy(state_t)
                    m = Categorical(probs)
                    action = draw(m)
                    policy.saved_actions.append(SavedAction(m.log_prob(action), state_value))
                    policy.saved_log_probs.append(m.entropy())
                state, reward, done = env.step(action.item())
                policy.rewards.append(reward)
                ep_reward += reward
                if done:
                    break
            running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
            R = 0
            returns = []
            for r in policy.rewards[::-1]:
                R = r + args.gamma * R
                returns.insert(0, R)
            returns = torch.tensor(returns)
            returns = (returns - returns.mean()) / (returns.std() + eps)
            if variant == "reinforce":
                policy_loss = []
                for log_prob, R in zip(policy.saved_log_probs, returns):
                    policy_loss.append(-log_prob * R)
                optimizer.zero_grad()
                loss = torch.cat(policy_loss).sum()
            else:
                policy_losses, value_losses = [], []
                for (log_prob, value), R in zip(policy.saved_actions, returns):
                    advantage = R - value.item()
                    policy_losses.append(-log_prob * advantage)
                    value_losses.append(F.smooth_l1_loss(value, torch.tensor([[R]])))
                entropy = torch.stack(policy.saved_log_probs).mean()
                optimizer.zero_grad()
                loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum() - 0.01 * entropy
            loss.backward()
            optimizer.step()
            history.append({"loss": loss.item(), "steps": t, "reward": ep_reward, "running": running_reward})
            del policy.rewards[:]
            del policy.saved_log_probs[:]
            del policy.saved_actions[:]
            if i_episode % args.log_interval == 0:
                print(f"Episode {i_episode}\tLast reward: {ep_reward:.2f}\tAverage reward: {running_reward:.2f}")
        results[variant] = history

    gp = load_init(GaussianPolicy())
    opt = optim.SGD(gp.parameters(), lr=0.05)
    obs = torch.from_numpy(np.eye(6, dtype=np.float32))
    target = torch.linspace(-1, 1, 12).view(6, 2)
    gauss = []
    for _ in range(5):
        dist = gp(obs)
        noise = torch.from_numpy(act_rng.standard_normal((6, 2)).astype(np.float32))
        a = dist.loc + dist.scale * noise if args.actions == "numpy" else dist.rsample()
        reward = -((a - target) ** 2).sum(-1)
        logp = dist.log_prob(a.detach()).sum(-1)
        loss = -(logp * (reward.detach() - reward.mean().detach())).mean() - reward.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        gauss.append([loss.item(), dist.entropy().sum().item()])
    c = Categorical(logits=torch.tensor([[0.5, -1.0, 2.0]]))
    results.update(gauss=gauss, log_std=gp.log_std.tolist(), cat_probs=c.probs.tolist(),
                   cat_entropy=c.entropy().item(), cat_logp=c.log_prob(torch.tensor([2])).tolist(),
                   batch_shape=list(c.batch_shape), sample_shape=list(c.sample((5,)).shape))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
