"""Soft actor-critic on a NumPy point-mass task, in the layout of popular SAC repositories:
a ``ReplayBuffer`` of NumPy arrays, ``GaussianPolicy`` with ``log_std.clamp(LOG_SIG_MIN,
LOG_SIG_MAX)``, ``Normal(mean, std).rsample()`` squashed by ``torch.tanh`` with the
``log(action_scale * (1 - y_t.pow(2)) + epsilon)`` correction (and the same through
``TransformedDistribution([TanhTransform(cache_size=1)])``), twin Q networks, ``hard_update``
/ ``soft_update`` of a target critic through ``param.data.copy_``, automatic entropy tuning
with a ``log_alpha`` tensor, three Adams, ``torch.min`` of the twin targets under ``no_grad``.
``--noise numpy`` replaces ``rsample``'s draws by NumPy ones so both libraries see one run.

    python s21_sac_continuous.py --updates 12 --noise numpy --out sac.json
"""

import argparse
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal, TransformedDistribution
from torch.distributions.transforms import TanhTransform
from torch.optim import Adam

LOG_SIG_MAX = 2
LOG_SIG_MIN = -20
epsilon = 1e-6


def weights_init_(m):
    if isinstance(m, nn.Linear):
        torch.nn.init.xavier_uniform_(m.weight, gain=1)
        torch.nn.init.constant_(m.bias, 0)


class QNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim):
        super().__init__()
        self.linear1 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = nn.Linear(hidden_dim, 1)
        self.linear4 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear5 = nn.Linear(hidden_dim, hidden_dim)
        self.linear6 = nn.Linear(hidden_dim, 1)
        self.apply(weights_init_)

    def forward(self, state, action):
        xu = torch.cat([state, action], 1)
        x1 = F.relu(self.linear1(xu))
        x1 = F.relu(self.linear2(x1))
        x1 = self.linear3(x1)
        x2 = F.relu(self.linear4(xu))
        x2 = F.relu(self.linear5(x2))
        x2 = self.linear6(x2)
        return x1, x2


class GaussianPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim, action_space=None):
        super().__init__()
        self.linear1 = nn.Linear(num_inputs, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.mean_linear = nn.Linear(hidden_dim, num_actions)
        self.log_std_linear = nn.Linear(hidden_dim, num_actions)
        self.apply(weights_init_)
        self.action_scale = torch.tensor(1.0)
        self.action_bias = torch.tensor(0.0)

    def forward(self, state):
        x = F.relu(self.linear1(state))
        x = F.relu(self.linear2(x))
        mean = self.mean_linear(x)
        log_std = self.log_std_linear(x)
        log_std = torch.clamp(log_std, min=LOG_SIG_MIN, max=LOG_SIG_MAX)
        return mean, log_std

    def sample(self, state, eps=None):
        mean, log_std = self.forward(state)
        std = log_std.exp()
        normal = Normal(mean, std)
        x_t = normal.rsample() if eps is None else mean + std * eps   # reparameterization trick
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + epsilon)
        log_prob = log_prob.sum(1, keepdim=True)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob, mean

    def to(self, device):
        self.action_scale = self.action_scale.to(device)
        self.action_bias = self.action_bias.to(device)
        return super().to(device)


def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


def hard_update(target, source):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(param.data)


class ReplayBuffer:
    def __init__(self, capacity, seed):
        self.rng = np.random.default_rng(seed)
        self.capacity = capacity
        self.buffer = []
        self.position = 0

    def push(self, state, action, reward, next_state, done):
        if len(self.buffer) < self.capacity:
            self.buffer.append(None)
        self.buffer[self.position] = (state, action, reward, next_state, done)
        self.position = (self.position + 1) % self.capacity

    def sample(self, batch_size):
        idx = self.rng.choice(len(self.buffer), batch_size, replace=False)
        batch = [self.buffer[i] for i in idx]
        state, action, reward, next_state, done = map(np.stack, zip(*batch))
        return state, action, reward, next_state, done

    def __len__(self):
        return len(self.buffer)


def main():
    parser = argparse.ArgumentParser(description="PyTorch Soft Actor-Critic Args")
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--tau", type=float, default=0.005)
    parser.add_argument("--lr", type=float, default=0.0003)
    parser.add_argument("--seed", type=int, default=123456)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--updates", type=int, default=12)
    parser.add_argument("--hidden_size", type=int, default=32)
    parser.add_argument("--target_update_interval", type=int, default=1)
    parser.add_argument("--noise", choices=["torch", "numpy"], default="torch")
    parser.add_argument("--double", action="store_true", help="train in float64")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    if args.double:
        torch.set_default_dtype(torch.float64)
    FloatTensor = torch.DoubleTensor if args.double else torch.FloatTensor
    npf = np.float64 if args.double else np.float32
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(args.seed)
    obs_dim, act_dim = 3, 2

    critic = QNetwork(obs_dim, act_dim, args.hidden_size).to(device=device)
    critic_target = QNetwork(obs_dim, act_dim, args.hidden_size).to(device)
    policy = GaussianPolicy(obs_dim, act_dim, args.hidden_size).to(device)
    init = np.random.default_rng(0)
    with torch.no_grad():
        for net in (critic, policy):
            for p in net.parameters():
                p.copy_(torch.from_numpy(init.uniform(-0.3, 0.3, tuple(p.shape)).astype(npf)))
    hard_update(critic_target, critic)
    critic_optim = Adam(critic.parameters(), lr=args.lr)
    policy_optim = Adam(policy.parameters(), lr=args.lr)
    target_entropy = -torch.prod(torch.Tensor([act_dim]).to(device)).item()
    log_alpha = torch.zeros(1, requires_grad=True, device=device)
    alpha_optim = Adam([log_alpha], lr=args.lr)
    alpha = 0.2

    memory = ReplayBuffer(1000, args.seed)
    state = rng.standard_normal(obs_dim).astype(npf)
    for _ in range(64):
        action = np.tanh(rng.standard_normal(act_dim)).astype(npf)
        next_state = (0.9 * state + 0.1 * np.concatenate([action, action[:1]])).astype(npf)
        reward = -float(np.sum(next_state ** 2))
        memory.push(state, action, reward, next_state, 0.0)
        state = next_state

    def eps(n):
        if args.noise == "torch":
            return None
        return torch.from_numpy(rng.standard_normal((n, act_dim)).astype(npf))

    history = []
    for updates in range(args.updates):
        state_batch, action_batch, reward_batch, next_state_batch, mask_batch = memory.sample(args.batch_size)
        state_batch = FloatTensor(state_batch).to(device)
        next_state_batch = FloatTensor(next_state_batch).to(device)
        action_batch = FloatTensor(action_batch).to(device)
        reward_batch = FloatTensor(reward_batch).to(device).unsqueeze(1)
        mask_batch = 1 - FloatTensor(mask_batch).to(device).unsqueeze(1)
        with torch.no_grad():
            next_state_action, next_state_log_pi, _ = policy.sample(next_state_batch, eps(args.batch_size))
            qf1_next_target, qf2_next_target = critic_target(next_state_batch, next_state_action)
            min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - alpha * next_state_log_pi
            next_q_value = reward_batch + mask_batch * args.gamma * (min_qf_next_target)
        qf1, qf2 = critic(state_batch, action_batch)
        qf1_loss = F.mse_loss(qf1, next_q_value)
        qf2_loss = F.mse_loss(qf2, next_q_value)
        qf_loss = qf1_loss + qf2_loss
        critic_optim.zero_grad()
        qf_loss.backward()
        critic_optim.step()

        pi, log_pi, _ = policy.sample(state_batch, eps(args.batch_size))
        qf1_pi, qf2_pi = critic(state_batch, pi)
        min_qf_pi = torch.min(qf1_pi, qf2_pi)
        policy_loss = ((alpha * log_pi) - min_qf_pi).mean()
        policy_optim.zero_grad()
        policy_loss.backward()
        policy_optim.step()

        alpha_loss = -(log_alpha * (log_pi + target_entropy).detach()).mean()
        alpha_optim.zero_grad()
        alpha_loss.backward()
        alpha_optim.step()
        alpha = log_alpha.exp()
        alpha_tlogs = alpha.clone()
        if updates % args.target_update_interval == 0:
            soft_update(critic_target, critic, args.tau)
        history.append([qf1_loss.item(), qf2_loss.item(), policy_loss.item(), alpha_loss.item(),
                        alpha_tlogs.item()])

    with torch.no_grad():
        mean, log_std = policy(state_batch[:4])
        squashed = TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform(cache_size=1)])
        a = torch.tanh(mean + 0.1)
        manual = (Normal(mean, log_std.exp()).log_prob(mean + 0.1) - torch.log(1 - a.pow(2) + epsilon)).sum(1)
        via_transform = squashed.log_prob(a).sum(1)
    result = {"history": history, "target_w": critic_target.linear3.weight[0, :4].tolist(),
              "manual": manual.tolist(), "transform": via_transform.tolist()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
