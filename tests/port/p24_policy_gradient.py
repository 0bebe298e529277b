"""Policy gradient: REINFORCE with a baseline on a toy corridor environment
(Categorical(logits=...), log_prob, entropy bonus, discounted returns normalised
with mean/std), and a Gaussian policy (Normal(mu, exp(log_std)), log_prob of actions,
kl_divergence to a reference policy).  Actions are drawn with NumPy from the
policy's probabilities so both runs take the same path."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    from torch.distributions import Categorical, Normal  # noqa: F401

    dist = torch.distributions
    rng = np.random.default_rng(24)

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
            self.pi = nn.Linear(16, 2)
            self.v = nn.Linear(16, 1)

        def forward(self, s):
            h = self.body(s)
            return self.pi(h), self.v(h).squeeze(-1)

    def obs(pos):
        return torch.tensor([pos / 5.0, 1.0, float(pos == 0), float(pos == 4)], dtype=torch.float64)

    policy = Policy().double()
    shared.model(torch, "policy", policy)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    gamma = 0.9
    out = {"returns": [], "losses": [], "actions": []}
    for _episode in range(5):
        pos, log_probs, values, rewards, entropies = 2, [], [], [], []
        for _t in range(6):
            logits, value = policy(obs(pos))
            m = dist.Categorical(logits=logits)
            probs = m.probs.detach().numpy()
            action = torch.tensor(int(rng.random() > probs[0]))
            log_probs.append(m.log_prob(action))
            entropies.append(m.entropy())
            values.append(value)
            pos = max(0, min(4, pos + (1 if action.item() == 1 else -1)))
            rewards.append(1.0 if pos == 4 else -0.1)
            out["actions"].append(action.item())
            if pos == 4:
                break
        R, returns = 0.0, []
        for r in reversed(rewards):
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns, dtype=torch.float64)
        if len(returns) > 1:
            returns = (returns - returns.mean()) / (returns.std() + 1e-8)
        values = torch.stack(values)
        advantage = returns - values.detach()
        policy_loss = -(torch.stack(log_probs) * advantage).sum()
        value_loss = nn.functional.smooth_l1_loss(values, returns)
        loss = policy_loss + 0.5 * value_loss - 0.01 * torch.stack(entropies).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["returns"].append(sum(rewards))
        out["losses"].append(loss.item())

    # a Gaussian policy for a continuous action
    mu_net = nn.Linear(3, 2).double()
    shared.model(torch, "mu", mu_net)
    log_std = nn.Parameter(torch.zeros(2, dtype=torch.float64) - 0.5)
    opt = torch.optim.SGD(list(mu_net.parameters()) + [log_std], lr=0.05)
    states = torch.from_numpy(rng.standard_normal((8, 3)))
    actions = torch.from_numpy(rng.standard_normal((8, 2)))
    adv = torch.from_numpy(rng.standard_normal(8))
    ref = dist.Normal(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    gl = []
    for _ in range(3):
        pi = dist.Normal(mu_net(states), log_std.exp())
        logp = pi.log_prob(actions).sum(-1)
        kl = dist.kl_divergence(pi, ref).sum(-1).mean()
        loss = -(logp * adv).mean() + 0.1 * kl - 1e-3 * pi.entropy().sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        gl.append(loss.item())
    out["gauss_losses"] = gl
    out["log_std"] = np_of(log_std)
    out["policy"] = [np_of(p) for p in policy.parameters()]
    return out
