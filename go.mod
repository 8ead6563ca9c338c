module anechat

go 1.26.0
